mod bounds;
mod confinement;
mod early;
mod handover;
mod seccomp;
mod spare;
mod stages;
mod support;
