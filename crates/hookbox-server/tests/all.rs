//! Integration tests of hookbox-server: routes through `app(state)` with `oneshot`, plus real
//! sockets on 127.0.0.1 for streaming and uploads. The store is a real SQLite file, the
//! environments are the real directory-backed local backend, the model is the offline agent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
