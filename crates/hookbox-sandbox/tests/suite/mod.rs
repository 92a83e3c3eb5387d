mod bounds;
mod seccomp;
mod stages;
mod support;
