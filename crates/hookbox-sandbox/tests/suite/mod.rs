mod bounds;
mod handover;
mod stages;
mod support;
