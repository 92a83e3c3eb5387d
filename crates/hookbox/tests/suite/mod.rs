mod env_cli;
mod postgres_cli;
mod hooks_cli;
mod drain_cli;
mod lifecycle_cli;
mod serve_cli;
mod support;
