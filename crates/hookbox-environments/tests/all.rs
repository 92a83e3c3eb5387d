//! Integration tests of hookbox-environments: one binary, modules under `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic

mod suite;
