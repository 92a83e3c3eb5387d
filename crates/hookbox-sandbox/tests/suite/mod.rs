mod common;
mod escape;
mod identity;
mod isolation;
mod lifecycle;
mod network;
mod repositories;
mod sources;
