//! Integration tests of hookbox-agent: the loop over the real local backend, and the gemini and
//! openai backends against fake servers on 127.0.0.1 speaking those protocols.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
