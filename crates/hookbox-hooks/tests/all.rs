//! Integration tests of the hooks engine with real processes and a real HTTP server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
