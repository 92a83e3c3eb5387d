//! What the snapshot tests and the snapshot bench share: environments on real ext4 images in a
//! throwaway data dir.
#![allow(clippy::unwrap_used, dead_code)] // helpers in a test binary may panic

use std::path::Path;

use hookbox_environments::environment::Environments;
use hookbox_environments::runner::{Launcher, SandboxOptions};

/// A data dir whose disks are detached when dropped.
pub struct DataDir(tempfile::TempDir);

impl DataDir {
    pub fn new() -> Self {
        DataDir(tempfile::tempdir().unwrap())
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        hookbox_environments::disk::unmount_all_under(self.0.path());
    }
}

/// Environments in `data`, each on an image of `cap` bytes (nothing is ever launched).
pub fn store(data: &Path, cap: u64) -> Environments {
    let mut options = SandboxOptions::new(Launcher::standalone("/nonexistent-launcher"));
    options.disk_limit_bytes = Some(cap);
    let credentials =
        std::sync::Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let egress = hookbox_environments::network::EgressOptions::new(credentials);
    Environments::open(data, options, egress).unwrap()
}

/// A new environment from `spec` (the API's environment JSON); its id.
pub fn create(store: &Environments, spec: serde_json::Value) -> String {
    let spec: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(spec).unwrap();
    store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap()
        .id
}
