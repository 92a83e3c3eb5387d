//! Integration tests of hookbox-browser-guard: a protected router on a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)] // shared test code outside #[test] fns

mod suite;
