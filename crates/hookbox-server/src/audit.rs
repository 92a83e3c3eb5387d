//! The audit log (`hookbox serve --audit-log FILE`): one JSON line per hook decision and per
//! egress decision, written by a `tracing` layer from the events the crates already emit.
//!
//! Each line is one `write(2)` on a file opened with `O_APPEND`, made before the event returns:
//! once a decision is logged it is in the kernel, so a SIGKILL of hookbox cannot lose it or tear
//! the line. A background thread `fdatasync`s new lines within a second (power loss). When the
//! file passes its size cap it is renamed to `FILE.1` (older ones shift to `.2` … and the oldest
//! past [`AuditOptions::keep`] is removed) and a new file is started. Lines never hold secrets:
//! the fields are the ones the events carry, which never include credentials or file contents.
//! This module must not change what is logged elsewhere.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Where and how much.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    pub path: PathBuf,
    /// Rotate once the file is this big.
    pub max_bytes: u64,
    /// Rotated files kept (`FILE.1` … `FILE.keep`).
    pub keep: usize,
}

impl AuditOptions {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            max_bytes: 100 << 20,
            keep: 5,
        }
    }
}

struct Sink {
    options: AuditOptions,
    file: File,
    written: u64,
    dirty: bool,
}

impl Sink {
    fn open(options: AuditOptions) -> std::io::Result<Self> {
        let file = open_append(&options.path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            options,
            file,
            written,
            dirty: false,
        })
    }

    fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.written > 0 && self.written + line.len() as u64 > self.options.max_bytes {
            self.rotate()?;
        }
        // One write: the whole line or (on a full disk) an error, never half of it.
        self.file.write_all(line)?;
        self.written += line.len() as u64;
        self.dirty = true;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let _ = self.file.sync_data();
        let numbered = |n: usize| {
            let mut p = self.options.path.clone().into_os_string();
            p.push(format!(".{n}"));
            PathBuf::from(p)
        };
        let _ = std::fs::remove_file(numbered(self.options.keep.max(1)));
        for n in (1..self.options.keep.max(1)).rev() {
            let _ = std::fs::rename(numbered(n), numbered(n + 1));
        }
        std::fs::rename(&self.options.path, numbered(1))?;
        self.file = open_append(&self.options.path)?;
        self.written = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// The layer that writes the audit log.
#[derive(Clone)]
pub struct AuditLayer {
    sink: Arc<Mutex<Sink>>,
}

impl std::fmt::Debug for AuditLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLayer").finish_non_exhaustive()
    }
}

impl AuditLayer {
    /// Opens (creating, 0600) the log and starts its syncing thread.
    pub fn open(options: AuditOptions) -> std::io::Result<Self> {
        let sink = Arc::new(Mutex::new(Sink::open(options)?));
        let syncing = Arc::downgrade(&sink);
        std::thread::Builder::new()
            .name("hookbox-audit-sync".into())
            .spawn(move || {
                while let Some(sink) = syncing.upgrade() {
                    {
                        let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                        if sink.dirty {
                            let _ = sink.file.sync_data();
                            sink.dirty = false;
                        }
                    }
                    drop(sink);
                    std::thread::sleep(Duration::from_secs(1));
                }
            })?;
        Ok(Self { sink })
    }

    fn write(&self, record: &Map<String, Value>) {
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        let mut sink = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = sink.append(&line) {
            // Not through tracing: this layer would see its own complaint.
            eprintln!("hookbox: cannot write the audit log: {e}");
        }
    }
}

/// The process's audit log, once `hookbox serve --audit-log` opened it.
static GLOBAL: std::sync::OnceLock<AuditLayer> = std::sync::OnceLock::new();

/// Makes `layer` the process's audit log (the first call wins).
pub fn install(layer: AuditLayer) -> bool {
    GLOBAL.set(layer).is_ok()
}

/// The layer to add to the subscriber at start-up: it writes through the audit log once one is
/// [`install`]ed, and does nothing before.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobalAudit;

impl<S> tracing_subscriber::Layer<S> for GlobalAudit
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(audit) = GLOBAL.get() {
            tracing_subscriber::Layer::<S>::on_new_span(audit, attrs, id, ctx);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if let Some(audit) = GLOBAL.get() {
            tracing_subscriber::Layer::<S>::on_event(audit, event, ctx);
        }
    }
}

/// What [`AuditLayer`] needs to see, whatever the log level.
pub fn layer_targets() -> tracing_subscriber::filter::Targets {
    use tracing::Level;
    tracing_subscriber::filter::Targets::new()
        .with_target("hookbox_hooks::engine", Level::INFO)
        .with_target("hookbox_server", Level::INFO)
        .with_target("hookbox_egress::audit", Level::INFO)
        .with_target("hookbox_agent::agent_loop", Level::INFO)
        .with_target("hookbox_snapshot", Level::INFO)
}

/// Events written as `kind: "snapshot"` lines, by their `event` field: what happens to an
/// environment's snapshots (checkpoints, failures while the store is down, restores, evictions,
/// a stale copy refused), its copy closed after a lost lease, and its expiry.
const SNAPSHOT_EVENTS: &[&str] = &[
    "snapshot.checkpoint",
    "snapshot.failed",
    "snapshot.restore",
    "snapshot.evict",
    "snapshot.stale",
    "environment.lease_lost",
    "environment.expired",
];

/// The span fields an audit line takes from its context.
#[derive(Debug, Default, Clone)]
struct Context3 {
    interaction: Option<String>,
    project: Option<String>,
    environment: Option<String>,
}

impl Visit for Context3 {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(
            field.name(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl Context3 {
    fn set(&mut self, name: &str, value: String) {
        match name {
            "interaction_id" => self.interaction = Some(value),
            "project" => self.project = Some(value),
            "environment_id" => self.environment = Some(value),
            _ => {}
        }
    }
}

/// An event's fields, as JSON values.
#[derive(Default)]
struct Record(Map<String, Value>);

impl Visit for Record {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let text = text.trim_matches('"').to_owned();
        self.0.insert(field.name().to_owned(), Value::from(text));
    }
}

impl<S> tracing_subscriber::Layer<S> for AuditLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Context3::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    /// Writes, by their stable names (`hookbox_protocol::events`), hook.ran / hook.failed
    /// (event, tool, group, handler, handler_index, handler_type, decision, reason, failure,
    /// duration_ms) and egress.allowed / egress.denied (project, environment, origin, mode,
    /// host, port, credential, rule, detail).
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut record = Record::default();
        event.record(&mut record);
        let snapshot = record
            .0
            .get("event")
            .and_then(Value::as_str)
            .is_some_and(|e| SNAPSHOT_EVENTS.contains(&e));
        use hookbox_protocol::events as names;
        let name = event.metadata().name();
        let kind = match name {
            _ if snapshot => "snapshot",
            names::HOOK_RAN | names::HOOK_FAILED => "hook",
            names::EGRESS_ALLOWED | names::EGRESS_DENIED => "egress",
            names::APPROVAL_SETTLED => "approval",
            names::AUTH_TOKEN_USED | names::AUTH_TOKEN_CHANGED => "auth_token",
            _ => return,
        };
        let mut line = Map::new();
        line.insert(
            "time".into(),
            Value::from(hookbox_store::time::now_rfc3339()),
        );
        line.insert("kind".into(), Value::from(kind));
        let mut context = Context3::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(found) = span.extensions().get::<Context3>() {
                    context.interaction = found.interaction.clone().or(context.interaction);
                    context.project = found.project.clone().or(context.project);
                    context.environment = found.environment.clone().or(context.environment);
                }
            }
        }
        // The interaction's span knows the project; the egress proxy's own events name it.
        let named = record.0.remove("project");
        let project = context.project.map(Value::from).or(named);
        line.insert("project".into(), project.unwrap_or(Value::Null));
        line.insert(
            "interaction".into(),
            context.interaction.map_or(Value::Null, Value::from),
        );
        let environment = context
            .environment
            .map(Value::from)
            .or_else(|| record.0.remove("environment"))
            .or_else(|| record.0.remove("environment_id"));
        line.insert("environment".into(), environment.unwrap_or(Value::Null));
        if kind == "egress" {
            let allowed = name == names::EGRESS_ALLOWED;
            line.insert(
                "decision".into(),
                Value::from(if allowed { "allowed" } else { "blocked" }),
            );
        }
        record.0.remove("message");
        if record.0.get("reason").and_then(Value::as_str) == Some("") {
            record.0.remove("reason");
        }
        line.extend(record.0);
        self.write(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_whole_lines_and_numbers_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut sink = Sink::open(AuditOptions {
            path: path.clone(),
            max_bytes: 70,
            keep: 2,
        })
        .unwrap();
        for i in 0..10 {
            sink.append(format!("{{\"n\":{i},\"pad\":\"xxxxxxxxxxxxxxxx\"}}\n").as_bytes())
                .unwrap();
        }
        let mut seen = Vec::new();
        for name in ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"] {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            for line in text.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                seen.push(v["n"].as_u64().unwrap());
            }
        }
        // Only the newest files are kept, oldest first, and every line is whole.
        assert_eq!(seen, [4, 5, 6, 7, 8, 9]);
        assert!(!dir.path().join("audit.jsonl.3").exists());
    }
}
