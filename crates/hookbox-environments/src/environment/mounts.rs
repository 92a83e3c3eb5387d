//! The disks of this host's environments as a whole: every one unmounted at a clean stop, and
//! those nobody holds open unmounted when idle (mounted again when opened, [`crate::disk`]).

use super::*;

impl Environments {
    /// Unmounts every environment disk on this host (at a clean stop, once no environment is
    /// open): returns how many were mounted. One that cannot be unmounted is logged and skipped.
    pub fn unmount_all(&self) -> Result<usize> {
        let mut count = 0;
        for id in self.local_ids()? {
            let tree = self.root.join(&id).join(TREE_DIR);
            match crate::disk::unmount_now(&tree) {
                Ok(true) => count += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(environment_id = %id, error = %e, "cannot unmount an environment disk")
                }
            }
        }
        Ok(count)
    }

    /// Unmounts the disks of environments that no process holds open (an environment this
    /// process has open is never touched) and that nothing used for `idle`: those a one-shot
    /// command left mounted, those created but not used since, those of a process that died;
    /// with each, the cgroups it left that nobody holds.
    /// Reads the mount table, not the environments, so it costs what is mounted, not what is
    /// stored. Returns how many were unmounted.
    pub fn unmount_idle(
        &self,
        idle: std::time::Duration,
        open: &std::collections::HashSet<String>,
    ) -> usize {
        let now = now();
        let mut count = 0;
        for mountpoint in crate::disk::mounts_under(&self.root) {
            let Some(dir) = mountpoint.parent() else {
                continue;
            };
            let (Some(id), Some(TREE_DIR)) = (
                dir.file_name().and_then(|n| n.to_str()),
                mountpoint.file_name().and_then(|n| n.to_str()),
            ) else {
                continue;
            };
            if !valid_id(id) || open.contains(id) {
                continue;
            }
            let Ok(meta) = read_meta(dir) else { continue };
            if now.saturating_sub(meta.last_accessed_at) < idle.as_secs() {
                continue;
            }
            match crate::disk::unmount_if_unused(dir, &mountpoint) {
                Ok(true) => {
                    // What left the disk mounted (a one-shot command) also left its cgroups.
                    super::cgroups::remove_if_unused(dir, id);
                    count += 1
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(environment_id = %id, %err, "cannot unmount an idle environment's disk")
                }
            }
        }
        count
    }
}
