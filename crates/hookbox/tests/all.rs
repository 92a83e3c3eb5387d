//! End-to-end tests that drive the `hookbox` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
