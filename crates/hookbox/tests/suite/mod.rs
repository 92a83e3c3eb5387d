mod answers_cli;
mod drain_cli;
mod env_cli;
mod hooks_cli;
mod lifecycle_cli;
mod postgres_cli;
mod serve_cli;
mod support;
