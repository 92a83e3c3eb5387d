//! Integration tests of hookbox-sandbox: real launches of the launcher binary, cold and in warm
//! sandboxes, checked for the stage and errno of a failure and for the bounds on time and
//! output, and the call hosts of warm sandboxes under both runtimes. One binary, modules under
//! `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic

mod suite;
