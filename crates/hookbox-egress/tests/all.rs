//! Integration tests of hookbox-egress: real TLS (a test CA from rcgen), real receivers on
//! 127.0.0.1, network namespaces the tests create.

// Test helpers panic on setup failure, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
