//! How a command handler's shell line becomes a bounded process.
//!
//! [`CommandRunner`] is the seam between the hooks engine and wherever commands run: the
//! [`LocalRunner`] here spawns `/bin/sh -c` on the host (used where no sandbox is wanted), and
//! `hookbox-environments` implements the same trait to run handlers inside an environment. Bounding
//! the process (stdin, output caps, the time-out, killing the whole group) is
//! `hookbox_process::supervise`'s; this module only says what to run.
//!
//! This module must not interpret output; deciding what output means is the engine's job.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tokio::process::Command;

pub use hookbox_process::{CommandOutput, DEFAULT_OUTPUT_LIMIT, OutputTap, Termination};

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// The shell line, run with `/bin/sh -c <command>` semantics (a sandboxed runner may exec a
    /// line that is one simple command of plain words directly, as bash does for `bash -c`, with
    /// the same outcome: see `hookbox_process::simple_command`).
    pub command: String,
    /// Written to the process's stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Wall-clock limit for the whole process tree.
    pub timeout: Duration,
    /// Cap on each of stdout and stderr, in bytes.
    pub output_limit: usize,
}

/// Errors that stop a command from running at all. Either way the handler failed (the engine
/// fails open, or closed with `on_failure: deny`) and the trace says why.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Starting or waiting for the process failed.
    #[error(transparent)]
    Process(#[from] hookbox_process::ProcessError),
    /// The runner's sandbox could not run it (the runner's own typed error, kept as the source).
    #[error("the sandbox refused to run the command: {0}")]
    Sandbox(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Runs a command handler's shell line somewhere, bounded.
#[async_trait]
pub trait CommandRunner: Send + Sync + fmt::Debug {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError>;
}

/// Runs commands directly on the host through `/bin/sh -c`, in a fresh process group, with the
/// given working directory. No isolation at all: for tests and for `--insecure-no-isolation`.
#[derive(Debug, Clone, Default)]
pub struct LocalRunner {
    pub cwd: Option<std::path::PathBuf>,
    pub env: Vec<(String, String)>,
}

#[async_trait]
impl CommandRunner for LocalRunner {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError> {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(&request.command);
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Ok(
            hookbox_process::supervise(cmd, request.stdin, request.timeout, request.output_limit)
                .await?,
        )
    }
}
