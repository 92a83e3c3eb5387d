mod bounds;
mod confinement;
mod seccomp;
mod spare;
mod stages;
mod support;
