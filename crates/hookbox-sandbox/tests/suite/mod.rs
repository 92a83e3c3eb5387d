mod bounds;
mod seccomp;
mod spare;
mod stages;
mod support;
