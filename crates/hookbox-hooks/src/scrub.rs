//! Scrubbing injected secrets out of what handlers say.
//!
//! A handler's stderr, its unparseable output and its deny reason are recorded (the step's
//! trace, the server log, the audit log). A handler may print what an upstream echoed back,
//! and an upstream may echo the headers hookbox's egress injected into the request (a bearer
//! token, a `transform` value), so every such text is scrubbed of the values the environment
//! may inject before anything records it. [`Secrets`] says which values those are (the egress
//! knows; this crate does not), [`scrub`] replaces them.

/// The values that must never be recorded: what the environment's egress injects.
pub trait Secrets: Send + Sync + std::fmt::Debug {
    /// Read when there is something to scrub, so an updated credential applies at once.
    fn values(&self) -> Vec<String>;
}

pub use hookbox_protocol::MIN_SECRET_LEN;

/// What a scrubbed value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// `text` with every occurrence of each secret replaced by [`REDACTED`] (longest first). An
/// excerpt (a text cut with `…`) loses its last characters too, as many as the longest secret
/// less one, whatever they are: an excerpt that stops inside a secret would still show its
/// start, and redacting only an end that matches one would tell whoever chose the text (an
/// upstream reflecting the sandbox's input) whether it guessed a secret's start.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets
        .iter()
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for secret in &secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    let (Some(longest), Some(body)) = (secrets.first(), out.strip_suffix('…')) else {
        return out;
    };
    // The last `longest - 1` bytes, widened to a character boundary.
    let mut keep = body.len().saturating_sub(longest.len() - 1);
    while !body.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{REDACTED}…", &body[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_values_and_the_end_of_an_excerpt_are_scrubbed_short_ones_kept() {
        let secrets = vec!["Bearer s3cr3t-token".to_owned(), "s3cr3t-token".to_owned()];
        assert_eq!(
            scrub("echo: authorization: Bearer s3cr3t-token!", &secrets),
            "echo: authorization: [redacted]!"
        );
        assert_eq!(scrub("x s3cr3t-token y", &secrets), "x [redacted] y");
        // An excerpt loses its last 18 bytes (the longest secret less one), cut inside a
        // secret or not: what is left says nothing about whether its end started one.
        assert_eq!(scrub("a header: Bearer s3cr…", &secrets), "a h[redacted]…");
        assert_eq!(scrub("a header: Bearer x9y8…", &secrets), "a h[redacted]…");
        assert_eq!(scrub("short…", &secrets), "[redacted]…");
        // Cut on a character boundary.
        assert_eq!(scrub("ééééééééééééé…", &secrets), "éééé[redacted]…");
        // Only an excerpt is taken to be cut.
        assert_eq!(scrub("a polar Bear", &secrets), "a polar Bear");
        assert_eq!(scrub("nothing here", &secrets), "nothing here");
        // Without secrets nothing changes, excerpts neither.
        assert_eq!(scrub("cut…", &[]), "cut…");
        // Values too short to be told apart from text are left alone.
        assert_eq!(scrub("a 1 b", &["1".to_owned()]), "a 1 b");
    }
}
