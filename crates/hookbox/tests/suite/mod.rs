mod env_cli;
mod hooks_cli;
mod serve_cli;
mod support;
