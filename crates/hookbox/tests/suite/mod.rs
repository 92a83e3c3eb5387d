mod hooks_cli;
mod support;
