mod common;
mod escape;
mod isolation;
mod lifecycle;
mod network;
mod repositories;
mod sources;
