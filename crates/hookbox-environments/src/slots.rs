//! [`ProcessSlots`]: how many sandboxed processes (tool calls and command hooks) a group of
//! environments, in practice one project, may run at once. A tool call that finds no free slot is
//! refused at once with a clear error for the model; a command hook waits for one, because a hook
//! that did not run must never turn into a silent "allow". This module only counts; it must not
//! launch anything.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// A counted limit on concurrently running sandboxed processes.
#[derive(Debug)]
pub struct ProcessSlots {
    label: String,
    limit: AtomicU64,
    in_use: Mutex<u64>,
    freed: Notify,
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct SlotGuard {
    slots: Arc<ProcessSlots>,
}

/// No slot was free.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quota exceeded: sandbox_processes ({limit} sandboxed processes at once) for {label}; wait for running calls to finish or ask the operator to raise the quota"
)]
pub struct SlotsExhausted {
    pub label: String,
    pub limit: u64,
}

impl ProcessSlots {
    /// `limit` slots, named `label` in errors (e.g. `project team-a`).
    pub fn new(label: impl Into<String>, limit: u64) -> Arc<Self> {
        Arc::new(Self {
            label: label.into(),
            limit: AtomicU64::new(limit),
            in_use: Mutex::new(0),
            freed: Notify::new(),
        })
    }

    /// Changes the limit (a quota edited while the server runs); running processes keep theirs.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
        self.freed.notify_waiters();
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Slots held now.
    pub fn in_use(&self) -> u64 {
        self.in_use.lock().map(|n| *n).unwrap_or(0)
    }

    /// A slot if one is free now.
    pub fn try_acquire(self: &Arc<Self>) -> Result<SlotGuard, SlotsExhausted> {
        let limit = self.limit();
        // A poisoned counter still counts: the guard below never panics while holding it.
        let mut in_use = self.in_use.lock().unwrap_or_else(|p| p.into_inner());
        if *in_use >= limit {
            return Err(SlotsExhausted {
                label: self.label.clone(),
                limit,
            });
        }
        *in_use += 1;
        Ok(SlotGuard {
            slots: Arc::clone(self),
        })
    }

    /// A slot, waiting until one is free.
    pub async fn acquire(self: &Arc<Self>) -> SlotGuard {
        loop {
            // Registered before the check, so a release between the check and the wait is seen.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Ok(guard) = self.try_acquire() {
                return guard;
            }
            freed.await;
        }
    }
}

/// The [`ProcessSlots`] of every project, created on first use with the default limit; the
/// server sets each project's limit from its quotas.
#[derive(Debug)]
pub struct SlotRegistry {
    default_limit: u64,
    projects: Mutex<std::collections::HashMap<String, Arc<ProcessSlots>>>,
}

/// The registry key of environments that name no project.
const UNNAMED: &str = "default";

impl SlotRegistry {
    pub fn new(default_limit: u64) -> Arc<Self> {
        Arc::new(Self {
            default_limit,
            projects: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// The slots of `project` (`None`: environments without a project).
    pub fn for_project(&self, project: Option<&str>) -> Arc<ProcessSlots> {
        let name = project.unwrap_or(UNNAMED);
        let mut projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        projects
            .entry(name.to_owned())
            .or_insert_with(|| ProcessSlots::new(format!("project {name}"), self.default_limit))
            .clone()
    }

    /// Sets `project`'s limit (creating its slots if needed).
    pub fn set_limit(&self, project: &str, limit: u64) {
        let slots = self.for_project(Some(project));
        if slots.limit() != limit {
            slots.set_limit(limit);
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut in_use = self.slots.in_use.lock().unwrap_or_else(|p| p.into_inner());
        *in_use = in_use.saturating_sub(1);
        drop(in_use);
        self.slots.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn try_refuses_at_the_limit_and_waiters_get_freed_slots() {
        let slots = ProcessSlots::new("project t", 2);
        let a = slots.try_acquire().unwrap();
        let _b = slots.try_acquire().unwrap();
        let err = slots.try_acquire().unwrap_err();
        assert_eq!(err.limit, 2);
        assert!(err.to_string().contains("sandbox_processes"));
        let waiter = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire().await }
        });
        // The waiter cannot finish while both slots are held; freeing one lets it through.
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(a);
        let c = waiter.await.unwrap();
        assert_eq!(slots.in_use(), 2);
        drop(c);
        assert_eq!(slots.in_use(), 1);
        slots.set_limit(1);
        assert!(slots.try_acquire().is_err());
    }
}
