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

/// Shorter values are not scrubbed: they cannot be told apart from ordinary text (and are no
/// secret worth the name).
pub const MIN_SECRET_LEN: usize = 8;

/// What a scrubbed value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// The shortest start of a secret recognised at the end of a text that was cut (an excerpt
/// that stops inside a secret still leaks its start).
const MIN_CUT_PREFIX: usize = 4;

/// `text` with every occurrence of each secret replaced by [`REDACTED`] (longest first), and an
/// excerpt (a text cut with `…`) that ends with the start of a secret cut there.
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
    let Some(body) = out.strip_suffix('…') else {
        return out;
    };
    let mut cut = None;
    for secret in &secrets {
        // The longest proper start of the secret that the text ends with.
        let found = (MIN_CUT_PREFIX..secret.len())
            .rev()
            .filter(|n| secret.is_char_boundary(*n))
            .find(|n| body.ends_with(&secret[..*n]));
        if let Some(n) = found {
            cut = Some(cut.map_or(n, |c: usize| c.max(n)));
        }
    }
    match cut {
        Some(n) => format!("{}{REDACTED}…", &body[..body.len() - n]),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_values_and_cut_starts_are_scrubbed_short_ones_kept() {
        let secrets = vec!["Bearer s3cr3t-token".to_owned(), "s3cr3t-token".to_owned()];
        assert_eq!(
            scrub("echo: authorization: Bearer s3cr3t-token!", &secrets),
            "echo: authorization: [redacted]!"
        );
        assert_eq!(scrub("x s3cr3t-token y", &secrets), "x [redacted] y");
        // An excerpt cut inside the secret.
        assert_eq!(
            scrub("header: Bearer s3cr…", &secrets),
            "header: [redacted]…"
        );
        assert_eq!(scrub("cut at s3cr3…", &secrets), "cut at [redacted]…");
        // Only an excerpt is taken to be cut.
        assert_eq!(scrub("a polar Bear", &secrets), "a polar Bear");
        assert_eq!(scrub("nothing here", &secrets), "nothing here");
        // Values too short to be told apart from text are left alone.
        assert_eq!(scrub("a 1 b", &["1".to_owned()]), "a 1 b");
    }
}
