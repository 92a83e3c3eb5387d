//! Codex's `apply_patch` format, as far as hookbox's file tools need it: written for
//! `write_to_file` (`*** Add File:`), `replace_file_content` (`*** Update File:` with one `@@`
//! hunk per chunk) and `delete_file` (`*** Delete File:`), and parsed back when a Codex hook
//! rewrites the patch (`updatedInput.command`).
//!
//! Codex patches are line-based and hookbox's replacements are substring-based: a chunk is
//! written as its old lines (`-`) then its new lines (`+`), and a hunk read back replaces the
//! text of its old and context lines, joined by `\n`, with its new and context lines. An Add
//! File's content read back ends with a newline, as Codex writes it.

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    Add {
        path: String,
        content: String,
    },
    Update {
        path: String,
        /// `*** Move to:` (hookbox has no rename; a rewrite that moves a file is refused).
        move_to: Option<String>,
        /// `(old, new)` text of each hunk, in order.
        chunks: Vec<(String, String)>,
    },
    Delete {
        path: String,
    },
}

impl FileOp {
    /// The file it touches.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Update { path, .. } | FileOp::Delete { path } => {
                path
            }
        }
    }
}

/// Why a patch could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an apply_patch hookbox can read: {0}")]
pub struct PatchError(pub String);

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const UPDATE: &str = "*** Update File: ";
const DELETE: &str = "*** Delete File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

/// Writes one operation as a whole patch.
pub fn write(op: &FileOp) -> String {
    let mut out = String::from(BEGIN);
    out.push('\n');
    match op {
        FileOp::Add { path, content } => {
            out.push_str(&format!("{ADD}{path}\n"));
            for line in lines(content) {
                out.push('+');
                out.push_str(line);
                out.push('\n');
            }
        }
        FileOp::Update {
            path,
            move_to,
            chunks,
        } => {
            out.push_str(&format!("{UPDATE}{path}\n"));
            if let Some(to) = move_to {
                out.push_str(&format!("{MOVE}{to}\n"));
            }
            for (old, new) in chunks {
                out.push_str("@@\n");
                for line in lines(old) {
                    out.push('-');
                    out.push_str(line);
                    out.push('\n');
                }
                for line in lines(new) {
                    out.push('+');
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        FileOp::Delete { path } => out.push_str(&format!("{DELETE}{path}\n")),
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The lines of `text`, without a final empty line after a trailing newline.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.strip_suffix('\n').unwrap_or(text).split('\n')
}

/// Reads a patch into its file operations, in order.
pub fn parse(text: &str) -> Result<Vec<FileOp>, PatchError> {
    let err = |m: &str| PatchError(m.to_owned());
    let mut rows = text
        .trim()
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l));
    if rows.next().map(str::trim) != Some(BEGIN) {
        return Err(err("it does not start with \"*** Begin Patch\""));
    }
    let mut ops: Vec<FileOp> = Vec::new();
    let mut ended = false;
    for row in rows {
        if ended {
            return Err(err("text after \"*** End Patch\""));
        }
        if row.trim() == END {
            ended = true;
        } else if let Some(path) = row.strip_prefix(ADD) {
            ops.push(FileOp::Add {
                path: path.trim().to_owned(),
                content: String::new(),
            });
        } else if let Some(path) = row.strip_prefix(UPDATE) {
            ops.push(FileOp::Update {
                path: path.trim().to_owned(),
                move_to: None,
                chunks: Vec::new(),
            });
        } else if let Some(path) = row.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: path.trim().to_owned(),
            });
        } else {
            body_line(ops.last_mut(), row)?;
        }
    }
    if !ended {
        return Err(err("it does not end with \"*** End Patch\""));
    }
    if ops.is_empty() {
        return Err(err("it changes no file"));
    }
    for op in &ops {
        if op.path().is_empty() {
            return Err(err("a file operation names no path"));
        }
    }
    Ok(ops)
}

fn body_line(op: Option<&mut FileOp>, row: &str) -> Result<(), PatchError> {
    let unexpected = || PatchError(format!("unexpected line {:?}", cut(row)));
    match op {
        Some(FileOp::Add { content, .. }) => {
            let line = row.strip_prefix('+').ok_or_else(unexpected)?;
            content.push_str(line);
            content.push('\n');
        }
        Some(FileOp::Update {
            move_to, chunks, ..
        }) => {
            if let Some(to) = row.strip_prefix(MOVE) {
                *move_to = Some(to.trim().to_owned());
            } else if row.starts_with("@@") {
                chunks.push((String::new(), String::new()));
            } else if row.trim() == EOF_MARK {
            } else {
                if chunks.is_empty() {
                    // A hunk may begin without an `@@` line.
                    chunks.push((String::new(), String::new()));
                }
                let Some((old, new)) = chunks.last_mut() else {
                    return Err(unexpected());
                };
                let (to_old, to_new, line) = match row.split_at_checked(1) {
                    Some(("-", rest)) => (true, false, rest),
                    Some(("+", rest)) => (false, true, rest),
                    Some((" ", rest)) => (true, true, rest),
                    None => (true, true, ""),
                    _ => return Err(unexpected()),
                };
                for (wanted, side) in [(to_old, old), (to_new, new)] {
                    if wanted {
                        if !side.is_empty() {
                            side.push('\n');
                        }
                        side.push_str(line);
                    }
                }
            }
        }
        Some(FileOp::Delete { .. }) | None => return Err(unexpected()),
    }
    Ok(())
}

fn cut(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_update_delete_round_trip() {
        let add = FileOp::Add {
            path: "/workspace/a.txt".into(),
            content: "one\ntwo\n".into(),
        };
        assert_eq!(
            write(&add),
            "*** Begin Patch\n*** Add File: /workspace/a.txt\n+one\n+two\n*** End Patch\n"
        );
        assert_eq!(parse(&write(&add)), Ok(vec![add]));

        let update = FileOp::Update {
            path: "/workspace/b.rs".into(),
            move_to: None,
            chunks: vec![("let a = 1;".into(), "let a = 2;\nlet b = 3;".into())],
        };
        assert_eq!(parse(&write(&update)), Ok(vec![update]));

        let delete = FileOp::Delete {
            path: "/workspace/.env".into(),
        };
        assert_eq!(parse(&write(&delete)), Ok(vec![delete]));
    }

    #[test]
    fn context_lines_belong_to_both_sides_and_moves_are_kept() {
        let text = "*** Begin Patch\n*** Update File: x\n*** Move to: y\n@@ fn main\n a\n-b\n+c\n d\n*** End of File\n*** End Patch";
        assert_eq!(
            parse(text),
            Ok(vec![FileOp::Update {
                path: "x".into(),
                move_to: Some("y".into()),
                chunks: vec![("a\nb\nd".into(), "a\nc\nd".into())],
            }])
        );
    }

    #[test]
    fn malformed_patches_are_refused() {
        assert!(parse("rm -rf /").is_err());
        assert!(parse("*** Begin Patch\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Delete File: a\n+x\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: a\n+x\n").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: \n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n+x\n*** End Patch").is_err());
    }
}
