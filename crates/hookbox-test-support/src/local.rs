//! A directory-backed implementation of both seams, **without any isolation and without hooks**:
//! each environment is a directory `<base>/<id>` standing for the sandbox root `/`; commands run
//! with `bash -c` (or `python3 -c`) on the host in `<root>/workspace`. It exists so the server can
//! be developed and tested before the real sandbox is wired in; never expose it to untrusted
//! callers. Paths are resolved inside the root and `..` escapes are refused.
//!
//! Tests only (see the crate doc): it lived in `hookbox-agent` until the real sandbox was wired.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use hookbox_protocol::api::{EnvironmentFile, FileType, Source};
use hookbox_protocol::{ToolCall, ToolName};
use serde_json::Value;

use hookbox_agent::execution::ToolExecution;
use hookbox_agent::seams::{
    EnvironmentProvider, EnvironmentSetup, EnvironmentUsage, ProviderError, ToolExecutor,
};

/// Unisolated, directory-backed environments.
#[derive(Debug, Clone)]
pub struct LocalBackend {
    base: PathBuf,
    timeout: Duration,
}

fn internal(e: std::io::Error) -> ProviderError {
    ProviderError::Internal(e.to_string())
}

impl LocalBackend {
    /// Environments live under `base`.
    /// The directory holding one subdirectory per environment.
    pub fn base(&self) -> &Path {
        &self.base
    }

    pub fn new(base: impl Into<PathBuf>) -> Self {
        LocalBackend {
            base: base.into(),
            timeout: Duration::from_secs(60),
        }
    }

    /// Creates environment `id` (tests pick fixed ids); nothing is left behind on error.
    pub async fn create_with_id(
        &self,
        id: &str,
        setup: &EnvironmentSetup,
    ) -> Result<(), ProviderError> {
        let root = self.base.join(id);
        tokio::fs::create_dir_all(root.join("workspace"))
            .await
            .map_err(internal)?;
        if let Err(e) = Self::place_sources(&root, &setup.sources).await {
            let _ = tokio::fs::remove_dir_all(&root).await;
            return Err(e);
        }
        Ok(())
    }

    fn root(&self, id: &str) -> Result<PathBuf, ProviderError> {
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(ProviderError::EnvironmentNotFound(id.to_owned()));
        }
        let root = self.base.join(id);
        if !root.is_dir() {
            return Err(ProviderError::EnvironmentNotFound(id.to_owned()));
        }
        Ok(root)
    }

    /// Maps a sandbox path (relative paths resolve against `/`) into `root`, refusing escapes.
    pub fn resolve(root: &Path, sandbox_path: &str) -> Result<PathBuf, ProviderError> {
        let mut out = root.to_path_buf();
        for comp in Path::new(sandbox_path).components() {
            match comp {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(part) => out.push(part),
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(ProviderError::InvalidPath(format!(
                        "`{sandbox_path}` leaves the environment"
                    )));
                }
            }
        }
        // Refuse symlinks that lead out of the root.
        let mut probe = out.clone();
        while !probe.exists() {
            if !probe.pop() {
                break;
            }
        }
        let canonical_root = root.canonicalize().map_err(internal)?;
        if let Ok(real) = probe.canonicalize()
            && !real.starts_with(&canonical_root)
        {
            return Err(ProviderError::InvalidPath(format!(
                "`{sandbox_path}` leaves the environment"
            )));
        }
        Ok(out)
    }

    fn sandbox_path(root: &Path, host: &Path) -> String {
        let rel = host.strip_prefix(root).unwrap_or(host);
        format!("/{}", rel.display())
    }

    async fn place_sources(root: &Path, sources: &[Source]) -> Result<(), ProviderError> {
        // Validate everything first so that nothing is written on error.
        let mut planned = Vec::new();
        for (i, source) in sources.iter().enumerate() {
            let kind = source
                .kind
                .as_deref()
                .unwrap_or("inline")
                .to_ascii_lowercase();
            if kind != "inline" {
                return Err(ProviderError::InvalidSource(format!(
                    "sources[{i}]: type `{kind}` is not supported by the local backend (only `inline`)"
                )));
            }
            let target = source.target.as_deref().unwrap_or_default();
            if target.trim_matches('/').is_empty() {
                return Err(ProviderError::InvalidSource(format!(
                    "sources[{i}]: `target` is required"
                )));
            }
            let path = Self::resolve(root, target)
                .map_err(|e| ProviderError::InvalidSource(format!("sources[{i}]: {e}")))?;
            let content = source.content.as_deref().unwrap_or_default();
            let bytes = match source.encoding.as_deref() {
                None | Some("") | Some("utf-8") | Some("utf8") => content.as_bytes().to_vec(),
                Some(enc) if enc.eq_ignore_ascii_case("base64") => {
                    base64::engine::general_purpose::STANDARD
                        .decode(content.trim())
                        .map_err(|e| {
                            ProviderError::InvalidSource(format!(
                                "sources[{i}]: content is not valid base64: {e}"
                            ))
                        })?
                }
                Some(other) => {
                    return Err(ProviderError::InvalidSource(format!(
                        "sources[{i}]: unknown encoding `{other}` (expected base64)"
                    )));
                }
            };
            planned.push((path, bytes));
        }
        for (path, bytes) in planned {
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(internal)?;
            }
            tokio::fs::write(&path, bytes).await.map_err(internal)?;
        }
        Ok(())
    }

    fn entry(root: &Path, path: &Path, meta: &std::fs::Metadata) -> EnvironmentFile {
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| format_time(d.as_secs()));
        EnvironmentFile {
            name: path.file_name().map(|n| n.to_string_lossy().into_owned()),
            path: Some(Self::sandbox_path(root, path)),
            kind: Some(if meta.is_dir() {
                FileType::Directory
            } else {
                FileType::File
            }),
            size_bytes: meta.is_file().then_some(meta.len()),
            mime_type: None,
            created: None,
            modified,
        }
    }

    async fn run_code(&self, root: &Path, args: &Value) -> ToolExecution {
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return ToolExecution::error("code_execution needs a `code` argument");
        };
        let workdir = root.join("workspace");
        if let Err(e) = tokio::fs::create_dir_all(&workdir).await {
            return ToolExecution::error(format!("cannot prepare /workspace: {e}"));
        }
        let mut cmd = match args.get("language").and_then(Value::as_str) {
            Some("python") => {
                let mut c = tokio::process::Command::new("python3");
                c.arg("-c").arg(code);
                c
            }
            _ => {
                let mut c = tokio::process::Command::new("bash");
                c.arg("-c").arg(code);
                c
            }
        };
        cmd.current_dir(&workdir)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        match tokio::time::timeout(self.timeout, cmd.output()).await {
            Err(_) => ToolExecution::error(format!(
                "the command timed out after {}s",
                self.timeout.as_secs()
            )),
            Ok(Err(e)) => ToolExecution::error(format!("could not start the command: {e}")),
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                if out.status.success() {
                    ToolExecution::ok(text)
                } else {
                    let code = out
                        .status
                        .code()
                        .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
                    ToolExecution::error(format!("{text}(exit status {code})"))
                }
            }
        }
    }

    async fn file_tool(&self, root: &Path, tool: ToolName, args: &Value) -> ToolExecution {
        let Some(path) = args.get("path").and_then(Value::as_str) else {
            return ToolExecution::error(format!("{tool} needs a `path` argument"));
        };
        let host = match Self::resolve(root, path) {
            Ok(p) => p,
            Err(e) => return ToolExecution::error(e.to_string()),
        };
        let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default();
        let result = match tool {
            ToolName::ViewFile => tokio::fs::read(&host)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            ToolName::WriteToFile => {
                async {
                    if let Some(parent) = host.parent() {
                        tokio::fs::create_dir_all(parent).await?;
                    }
                    tokio::fs::write(&host, text("content")).await?;
                    Ok(format!("wrote {} bytes to {path}", text("content").len()))
                }
                .await
            }
            ToolName::ReplaceFileContent => {
                async {
                    let old = tokio::fs::read_to_string(&host).await?;
                    let needle = text("old_content");
                    if needle.is_empty() || !old.contains(needle) {
                        return Err(std::io::Error::other(format!(
                            "old_content not found in {path}"
                        )));
                    }
                    tokio::fs::write(&host, old.replacen(needle, text("new_content"), 1)).await?;
                    Ok(format!("edited {path}"))
                }
                .await
            }
            ToolName::ListDir => {
                async {
                    let mut names = Vec::new();
                    let mut dir = tokio::fs::read_dir(&host).await?;
                    while let Some(e) = dir.next_entry().await? {
                        let mut name = e.file_name().to_string_lossy().into_owned();
                        if e.file_type().await?.is_dir() {
                            name.push('/');
                        }
                        names.push(name);
                    }
                    names.sort();
                    Ok(names.join("\n"))
                }
                .await
            }
            ToolName::DeleteFile => tokio::fs::remove_file(&host)
                .await
                .map(|()| format!("deleted {path}")),
            ToolName::CodeExecution => Ok(String::new()),
        };
        match result {
            Ok(out) => ToolExecution::ok(out),
            Err(e) => ToolExecution::error(format!("{path}: {e}")),
        }
    }
}

#[async_trait]
impl ToolExecutor for LocalBackend {
    async fn execute(&self, environment_id: &str, call: &ToolCall) -> ToolExecution {
        let root = match self.root(environment_id) {
            Ok(r) => r,
            Err(e) => return ToolExecution::error(e.to_string()),
        };
        match call.name {
            ToolName::CodeExecution => self.run_code(&root, &call.args).await,
            tool => self.file_tool(&root, tool, &call.args).await,
        }
    }

    /// No hooks here: an approved call runs as any other.
    async fn execute_approved(
        &self,
        environment_id: &str,
        call: &ToolCall,
        _output: Option<hookbox_agent::OutputSink>,
    ) -> ToolExecution {
        self.execute(environment_id, call).await
    }
}

#[async_trait]
impl EnvironmentProvider for LocalBackend {
    async fn create(&self, setup: &EnvironmentSetup) -> Result<String, ProviderError> {
        let id = new_env_id();
        self.create_with_id(&id, setup).await?;
        Ok(id)
    }

    async fn update(&self, id: &str, setup: &EnvironmentSetup) -> Result<(), ProviderError> {
        let root = self.root(id)?;
        Self::place_sources(&root, &setup.sources).await
    }

    async fn fork(&self, from: &str, _setup: &EnvironmentSetup) -> Result<String, ProviderError> {
        let src = self.root(from)?;
        let to = new_env_id();
        let dst = self.base.join(&to);
        let status = tokio::process::Command::new("cp")
            .arg("-a")
            .arg(&src)
            .arg(&dst)
            .status()
            .await
            .map_err(internal)?;
        if !status.success() {
            return Err(ProviderError::Internal(format!(
                "cp -a exited with {status}"
            )));
        }
        Ok(to)
    }

    async fn delete(&self, id: &str) -> Result<(), ProviderError> {
        let root = self.root(id)?;
        tokio::fs::remove_dir_all(root).await.map_err(internal)
    }

    async fn list_files(
        &self,
        id: &str,
        path: &str,
        recursive: bool,
    ) -> Result<Vec<EnvironmentFile>, ProviderError> {
        let root = self.root(id)?;
        let host = Self::resolve(&root, path)?;
        let meta = tokio::fs::metadata(&host)
            .await
            .map_err(|_| ProviderError::FileNotFound(path.to_owned()))?;
        if !meta.is_dir() {
            return Ok(vec![Self::entry(&root, &host, &meta)]);
        }
        let mut out = Vec::new();
        let mut pending = vec![host];
        while let Some(dir) = pending.pop() {
            let mut entries = tokio::fs::read_dir(&dir).await.map_err(internal)?;
            while let Some(e) = entries.next_entry().await.map_err(internal)? {
                let meta = e.metadata().await.map_err(internal)?;
                if recursive && meta.is_dir() {
                    pending.push(e.path());
                }
                out.push(Self::entry(&root, &e.path(), &meta));
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    async fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>, ProviderError> {
        let root = self.root(id)?;
        let host = Self::resolve(&root, path)?;
        match tokio::fs::metadata(&host).await {
            Ok(m) if m.is_file() => tokio::fs::read(&host).await.map_err(internal),
            _ => Err(ProviderError::FileNotFound(path.to_owned())),
        }
    }

    async fn write_file(
        &self,
        id: &str,
        path: &str,
        bytes: &[u8],
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError> {
        let root = self.root(id)?;
        if path.trim_matches('/').is_empty() {
            return Err(ProviderError::InvalidPath("a file path is required".into()));
        }
        let host = Self::resolve(&root, path)?;
        if !overwrite && tokio::fs::try_exists(&host).await.unwrap_or(false) {
            return Err(ProviderError::FileExists(path.to_owned()));
        }
        if let Some(parent) = host.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(internal)?;
        }
        tokio::fs::write(&host, bytes).await.map_err(internal)?;
        let meta = tokio::fs::metadata(&host).await.map_err(internal)?;
        Ok(Self::entry(&root, &host, &meta))
    }

    async fn write_file_from(
        &self,
        id: &str,
        path: &str,
        mut source: std::fs::File,
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError> {
        let root = self.root(id)?;
        if path.trim_matches('/').is_empty() {
            return Err(ProviderError::InvalidPath("a file path is required".into()));
        }
        let host = Self::resolve(&root, path)?;
        if !overwrite && tokio::fs::try_exists(&host).await.unwrap_or(false) {
            return Err(ProviderError::FileExists(path.to_owned()));
        }
        if let Some(parent) = host.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(internal)?;
        }
        let target = host.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Seek as _;
            source.rewind()?;
            let mut out = std::fs::File::create(&target)?;
            std::io::copy(&mut source, &mut out).map(|_| ())
        })
        .await
        .map_err(|e| ProviderError::Internal(e.to_string()))?
        .map_err(internal)?;
        let meta = tokio::fs::metadata(&host).await.map_err(internal)?;
        Ok(Self::entry(&root, &host, &meta))
    }

    async fn usage(&self, id: &str) -> Result<EnvironmentUsage, ProviderError> {
        let files = self.list_files(id, "/", true).await?;
        Ok(EnvironmentUsage {
            file_count: files
                .iter()
                .filter(|f| f.kind == Some(FileType::File))
                .count() as u64,
            size_bytes: files.iter().filter_map(|f| f.size_bytes).sum(),
        })
    }
}

fn new_env_id() -> String {
    format!("env_{:016x}", rand::random::<u64>())
}

fn format_time(secs: u64) -> String {
    // Same algorithm as hookbox-store's; duplicated to keep the harness free of the store.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}
