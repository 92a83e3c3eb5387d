//! Integration tests of hookbox-store against real SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
