//! `hookbox hooks convert`: one dialect's hooks file written in another where the mapping is
//! exact ([`hookbox_hooks::dialect::convert`]), refused with every reason where it is not.

use super::output::out;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use hookbox_hooks::dialect::{Dialect, DialectSet};
use hookbox_rootfs::RootDir;

use super::hooks::{dialect_of, read_bounded};

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The dialect to write: agents, claude (claude-code), gemini (gemini-cli), codex, cursor,
    /// copilot.
    #[arg(long, value_parser = parse_dialect)]
    to: Dialect,
    /// The project directory whose hooks files are looked for (as at / of a sandbox).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// What to convert: a dialect (its one hooks file under --root) or a file (its dialect from
    /// its path: .claude/settings.json, .gemini/settings.json, .codex/hooks.json or
    /// config.toml, .cursor/hooks.json, .github/hooks/NAME.json). Default: the one vendor
    /// hooks file under --root.
    #[arg(long, value_name = "DIALECT|FILE")]
    from: Option<String>,
    /// Where to write the result (`-` for standard output). The result holds only the hooks:
    /// an existing file that holds other settings (permissions, …) is not overwritten; write
    /// elsewhere and merge by hand.
    #[arg(long, value_name = "FILE|-", default_value = "-")]
    out: String,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    s.parse::<Dialect>().map_err(|e| e.to_string())
}

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let (dialect, label, bytes) = match args.from.as_deref().map(str::parse::<Dialect>) {
        Some(Ok(Dialect::Agents)) => bail!(
            "a hooks file of hookbox's own format cannot be converted: its handlers answer in hookbox's protocol, which no other agent CLI reads"
        ),
        Some(Ok(dialect)) => {
            let files = vendor_files(&args.root, DialectSet::from_iter([dialect]))?;
            one_file(files, &args.root)?
        }
        Some(Err(_)) => {
            let path = PathBuf::from(args.from.as_deref().unwrap_or_default());
            let dialect = dialect_of(&path);
            if dialect == Dialect::Agents {
                bail!(
                    "{} is not a vendor hooks file (by its path: .claude/settings.json, .gemini/settings.json, .codex/hooks.json, .codex/config.toml, .cursor/hooks.json, .github/hooks/NAME.json); hookbox's own files cannot be converted",
                    path.display()
                );
            }
            let bytes = read_bounded(&path)?;
            (dialect, path.display().to_string(), bytes)
        }
        None => one_file(vendor_files(&args.root, DialectSet::all())?, &args.root)?,
    };
    if args.out != "-" {
        refuse_to_overwrite_settings(std::path::Path::new(&args.out))?;
    }
    match hookbox_hooks::dialect::convert::convert_file(dialect, &label, &bytes, args.to) {
        Ok(value) => {
            let text = format!("{}\n", serde_json::to_string_pretty(&value)?);
            if args.out == "-" {
                out!("{text}")?;
            } else {
                std::fs::write(&args.out, text)
                    .with_context(|| format!("cannot write {}", args.out))?;
                eprintln!("wrote {} ({dialect} → {})", args.out, args.to);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(refusals) => {
            eprintln!(
                "cannot write {label} ({dialect}) exactly as {}; nothing written:",
                args.to
            );
            for r in &refusals {
                eprintln!("  {r}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The result is JSON holding only hooks: never written over TOML or over a settings file that
/// holds anything else.
fn refuse_to_overwrite_settings(out: &std::path::Path) -> anyhow::Result<()> {
    if out.extension().is_some_and(|e| e == "toml") {
        bail!(
            "{} is TOML; convert writes JSON (.codex/hooks.json for Codex)",
            out.display()
        );
    }
    if !out.exists() {
        return Ok(());
    }
    let bytes = read_bounded(out)?;
    let other: Vec<String> = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => map
            .keys()
            .filter(|k| !matches!(k.as_str(), "hooks" | "version" | "hooksConfig"))
            .cloned()
            .collect(),
        _ => vec!["(not a JSON object)".to_owned()],
    };
    if !other.is_empty() {
        bail!(
            "{} holds other settings ({}); the result holds only hooks: write it elsewhere and merge by hand",
            out.display(),
            other.join(", ")
        );
    }
    Ok(())
}

/// The vendor hooks files of `dialects` under `root` (at / then /workspace), with their bytes.
fn vendor_files(
    root: &std::path::Path,
    dialects: DialectSet,
) -> anyhow::Result<Vec<(Dialect, String, Vec<u8>)>> {
    let dir = RootDir::open(root)
        .with_context(|| format!("cannot use {} as the project root", root.display()))?;
    let mut found = Vec::new();
    for dialect in dialects.iter() {
        for base in hookbox_hooks::dialect::load::BASES {
            for file in hookbox_hooks::dialect::load::candidate_files(&dir, dialect, base) {
                let path = root.join(file.trim_start_matches('/'));
                if path.is_file() {
                    let bytes = read_bounded(&path)?;
                    let label = path.display().to_string();
                    // A settings file without hooks (only permissions) is not a hooks file.
                    let (group, diagnostics) =
                        hookbox_hooks::dialect::load::parse(dialect, &label, &bytes);
                    if group.is_some() || !diagnostics.is_empty() {
                        found.push((dialect, label, bytes));
                    }
                }
            }
        }
    }
    Ok(found)
}

fn one_file(
    mut files: Vec<(Dialect, String, Vec<u8>)>,
    root: &std::path::Path,
) -> anyhow::Result<(Dialect, String, Vec<u8>)> {
    match files.len() {
        1 => Ok(files.remove(0)),
        0 => bail!("no vendor hooks file under {}", root.display()),
        _ => bail!(
            "several hooks files under {} ({}); convert one at a time with --from FILE",
            root.display(),
            files
                .iter()
                .map(|(_, f, _)| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
