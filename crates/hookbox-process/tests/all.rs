//! Integration tests of hookbox-process: real process trees on the host, supervised to their
//! end. One binary, modules under `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic

mod suite;
