mod bounds;
mod stages;
mod support;
