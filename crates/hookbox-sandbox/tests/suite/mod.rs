mod common;
mod escape;
mod isolation;
mod lifecycle;
mod sources;
