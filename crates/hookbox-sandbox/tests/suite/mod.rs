mod bounds;
mod spare;
mod stages;
mod support;
