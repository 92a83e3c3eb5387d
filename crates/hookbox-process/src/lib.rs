//! Process supervision, at the bottom of everything in hookbox that runs a program: command
//! hooks (`hookbox-hooks`), sandboxes (`hookbox-sandbox`: the launcher, warm calls), repository
//! clones and host tools (`hookbox-environments`). None of them depends on another to bound a
//! process.
//!
//! Owns:
//! - [`supervise`](mod@supervise): a process tree spawned in its own process group (or started elsewhere and
//!   handed over as a [`Spawned`]) run to its end: stdin written without blocking on a program
//!   that never reads it, stdout and stderr capped ([`DEFAULT_OUTPUT_LIMIT`], 1 MiB), the whole
//!   group killed at the time-out, on output overflow and once the leader exited (so a
//!   grandchild holding a pipe cannot stall the caller), the pipes drained within a grace after
//!   that; its result is a [`CommandOutput`];
//! - [`pidfd`]: a process known by a pidfd (a warm sandbox's call, a launcher being stopped):
//!   waiting for its end and killing it without pid reuse races;
//! - [`host`]: trusted host tools (`mkfs.ext4`, `mount`, `cp`, `runsc`) run to completion within
//!   a deadline from synchronous code;
//! - [`simple`]: whether a shell line is one simple command of plain words, which a runner may
//!   exec directly instead of through `/bin/sh -c` (as bash does for `bash -c`);
//! - [`ProcessError`] and [`host::HostError`]: what stops a program from running at all, with the
//!   errno where there is one and whether it is worth another try ([`ProcessError::is_transient`]).
//!
//! Must not: interpret what a program printed (the hooks engine and the tools do), build
//! sandboxes, or know hooks, environments or the API. It depends on no other hookbox crate.

mod error;
pub mod host;
pub mod pidfd;
pub mod simple;
pub mod supervise;

pub use error::{ProcessError, is_momentary};
pub use simple::simple_command;
pub use supervise::{
    CommandOutput, DEFAULT_OUTPUT_LIMIT, OutputPipe, OutputTap, Spawned, Termination, kill_group,
    supervise, supervise_spawned, supervise_with_tap, termination_of,
};
