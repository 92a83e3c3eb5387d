//! The interaction's steps up to a tool call as JSON Lines: what another agent CLI's hook reads
//! at its `transcript_path` (`hookbox_hooks::dialect::payload`).
//!
//! Bounded: at most [`TRANSCRIPT_LIMIT`] bytes, keeping the newest steps whole (older ones are
//! left out first); a single step whose line is longer than [`STEP_LINE_LIMIT`] is written as
//! `{"type": …, "truncated": true}`. The bound keeps the file inside one shell argument.

use hookbox_protocol::api::Step;

/// The most bytes a transcript holds.
pub const TRANSCRIPT_LIMIT: usize = 64 * 1024;

/// The longest line one step may take before it is written as a stub.
pub const STEP_LINE_LIMIT: usize = 16 * 1024;

/// The newest `steps` that fit in [`TRANSCRIPT_LIMIT`], one JSON object per line, oldest first.
pub fn jsonl(steps: &[Step]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut total = 0usize;
    for step in steps.iter().rev() {
        // Serialising our own types cannot fail; a step that somehow did is left out.
        let Ok(mut line) = serde_json::to_vec(step) else {
            continue;
        };
        if line.len() > STEP_LINE_LIMIT {
            let kind = serde_json::to_value(step)
                .ok()
                .and_then(|v| v.get("type").cloned())
                .unwrap_or(serde_json::Value::Null);
            line = serde_json::to_vec(&serde_json::json!({"type": kind, "truncated": true}))
                .unwrap_or_default();
        }
        line.push(b'\n');
        if total + line.len() > TRANSCRIPT_LIMIT {
            break;
        }
        total += line.len();
        lines.push(line);
    }
    lines.into_iter().rev().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Step {
        serde_json::from_value(
            serde_json::json!({"type": "user_input", "content": [{"type": "text", "text": t}]}),
        )
        .expect("a user_input step")
    }

    #[test]
    fn keeps_the_newest_steps_whole_within_the_limit() {
        assert!(jsonl(&[]).is_empty());
        let steps: Vec<Step> = (0..2000)
            .map(|i| text(&format!("step {i} {}", "x".repeat(100))))
            .collect();
        let out = jsonl(&steps);
        assert!(out.len() <= TRANSCRIPT_LIMIT);
        let written = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = written.lines().collect();
        assert!(lines.len() > 10 && lines.len() < 2000);
        assert!(lines.last().is_some_and(|l| l.contains("step 1999 ")));
        for line in &lines {
            serde_json::from_str::<serde_json::Value>(line).expect("each line is JSON");
        }
        let huge = jsonl(&[text(&"y".repeat(STEP_LINE_LIMIT * 2))]);
        let v: serde_json::Value = serde_json::from_slice(&huge).expect("json");
        assert_eq!(v["truncated"], serde_json::json!(true));
    }
}
