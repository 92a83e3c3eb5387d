mod bounds;
mod confinement;
mod handover;
mod seccomp;
mod spare;
mod stages;
mod support;
