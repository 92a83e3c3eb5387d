//! Integration tests of hookbox-browser-guard: a protected router on a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
