//! How the environments crate's errors reach the seams' callers: as [`ProviderError`]s (which the
//! server maps to HTTP statuses), and blocking work run off the async executor.

use hookbox_agent::seams::ProviderError;
use hookbox_environments::environment::EnvError;
use hookbox_rootfs::RootFsError;

/// Runs `f` on the blocking pool, its error as a [`ProviderError`].
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, EnvError> + Send + 'static,
) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProviderError::Internal(e.to_string()))?
        .map_err(env_error)
}

pub(super) fn env_error(err: EnvError) -> ProviderError {
    match err {
        EnvError::NotFound(id) | EnvError::BadId(id) => ProviderError::EnvironmentNotFound(id),
        EnvError::Source(e) => ProviderError::InvalidSource(e.to_string()),
        EnvError::Policy(e) => ProviderError::InvalidSource(format!("network: {e}")),
        EnvError::Fs(e) => fs_error(e),
        other => ProviderError::Internal(other.to_string()),
    }
}

pub(super) fn fs_error(err: RootFsError) -> ProviderError {
    match err {
        RootFsError::NotFound { path } => ProviderError::FileNotFound(path),
        RootFsError::NotAFile { path } | RootFsError::IsADirectory { path } => {
            ProviderError::InvalidPath(format!("`{path}` is not a regular file"))
        }
        RootFsError::NotADirectory { path } => {
            ProviderError::InvalidPath(format!("`{path}`: a parent is not a directory"))
        }
        RootFsError::InvalidPath { path, reason } => {
            ProviderError::InvalidPath(format!("`{path}`: {reason}"))
        }
        RootFsError::TooLarge { path, limit } => {
            ProviderError::InvalidPath(format!("`{path}` is larger than {limit} bytes"))
        }
        other => ProviderError::Internal(other.to_string()),
    }
}
