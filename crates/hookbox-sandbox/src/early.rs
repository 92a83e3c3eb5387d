//! A warm sandbox's launcher started before its spec is known, so that its exec and loading
//! (about 0.8 ms of a one-shot `hookbox tool` call of 9 ms, on the critical path otherwise)
//! overlap what the command does before its first launch: opening the environment, reading its
//! hooks, building the spec.
//!
//! The launcher reads its spec at [`crate::spec::SPEC_FD`]; an early one finds there one end of a socket pair
//! and waits on it. `EarlyLauncher::hand` sends the spec once it is known, as a sealed memfd
//! in one message (as every spec travels: nothing can change it once sent; and a socket, unlike
//! a pipe, cannot be reopened through `/proc/<pid>/fd` by another process of the same user to
//! slip bytes in while the launcher waits), then closes its end. From then on the launcher is
//! exactly one spawned with its spec ([`crate::warm::WarmSandbox`]): its status pipe and request
//! socket were made with it; a network namespace to join comes with the spec, and the launcher
//! puts it where a spawn would have. It builds only a warm sandbox under full isolation
//! (`EarlyLauncher::hand` refuses any other spec, and so does the launcher: a cold one needs
//! the program's stdio at spawn). An early launcher not handed a spec is killed with its process
//! group and reaped when dropped (it would otherwise exit at its socket's end of file, on a
//! failure nobody reads). If hookbox dies first, the launcher gets that end of file.
//!
//! Only a process that builds few sandboxes and soon exits starts one (the one-shot commands):
//! it is a process that waits, and one start whose sandbox turns out not to take it is wasted.
//! This module must not decide when that is worth it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Mutex, PoisonError};

use crate::fdpass;
use crate::handoff::{Launcher, spec_memfd};
use crate::spec::{Isolation, LaunchSpec, Network};
use crate::warm::{Launched, Unowned, spawn_warm_launcher};

/// A launcher waiting for its spec (see the module doc).
#[derive(Debug)]
pub struct EarlyLauncher {
    /// What was spawned, to hand only a sandbox that the same launcher would have built.
    launcher: Launcher,
    child: Unowned,
    /// Our end of the socket the spec is sent on.
    spec: OwnedFd,
    status_read: OwnedFd,
    /// Our end of the request socket.
    socket: OwnedFd,
}

impl EarlyLauncher {
    /// Spawns `launcher` with a socket for its spec, its status pipe and its request socket.
    pub fn start(launcher: &Launcher) -> std::io::Result<Self> {
        let (spec_ours, spec_theirs) = fdpass::pair()?;
        let (child, status_read, ours) = spawn_warm_launcher(launcher, spec_theirs, None)?;
        Ok(Self {
            launcher: launcher.clone(),
            child,
            spec: spec_ours,
            status_read,
            socket: ours,
        })
    }

    /// The launcher's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Hands the launcher `key`, a warm sandbox's spec under full isolation, with `netns`, the
    /// network namespace it joins (`Network::Join`; none for a namespace of its own); `None` for
    /// any other spec, or when the launcher is gone (the early launcher is then dropped: killed
    /// and reaped).
    pub(crate) fn hand(self, key: &LaunchSpec, netns: Option<&OwnedFd>) -> Option<Launched> {
        let network_agrees = match key.network {
            Network::Isolated => netns.is_none(),
            Network::Join => netns.is_some(),
        };
        if !key.warm || key.isolation != Isolation::Full || !network_agrees {
            return None;
        }
        let spec = spec_memfd(key).ok()?;
        let mut fds = vec![spec.as_fd()];
        fds.extend(netns.map(AsFd::as_fd));
        // One small message on an empty socket: it never waits (`fdpass::send` does not).
        fdpass::send(self.spec.as_fd(), b"S", &fds).ok()?;
        let Self {
            child,
            status_read,
            socket,
            ..
        } = self;
        Some((child, status_read, socket))
    }
}

/// Where a process keeps the early launcher its first warm sandbox takes.
#[derive(Debug, Default)]
pub struct EarlySlot(Mutex<Option<EarlyLauncher>>);

impl EarlySlot {
    /// Starts an early launcher of `launcher` into the slot (one already there is dropped). One
    /// that cannot be started is only logged: the sandbox's own start says what is wrong.
    pub fn fill(&self, launcher: &Launcher) {
        let early = match EarlyLauncher::start(launcher) {
            Ok(early) => Some(early),
            Err(error) => {
                tracing::debug!(%error, "cannot start the launcher early");
                None
            }
        };
        let replaced = std::mem::replace(&mut *self.lock(), early);
        // Killed and reaped outside the lock.
        drop(replaced);
    }

    /// The early launcher, if there is one of `launcher` (any other is dropped).
    pub fn take(&self, launcher: &Launcher) -> Option<EarlyLauncher> {
        let early = self.lock().take();
        early.filter(|early| early.launcher == *launcher)
    }

    /// The pid of the early launcher in the slot, if there is one.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(EarlyLauncher::pid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<EarlyLauncher>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Limits, RuntimeKind};

    /// A warm sandbox's spec under full isolation in a namespace of its own (what is built from
    /// it does not matter: the launcher here is `sleep`, which never reads it).
    fn key() -> LaunchSpec {
        LaunchSpec {
            isolation: Isolation::Full,
            argv: Vec::new(),
            direct: None,
            env: Vec::new(),
            cwd: "/".into(),
            tree: "/nonexistent".into(),
            mountpoint: "/nonexistent".into(),
            host_read_only: Vec::new(),
            etc_entries: Vec::new(),
            binds: Vec::new(),
            files: Vec::new(),
            network: Network::Isolated,
            limits: Limits {
                address_space_bytes: None,
                nproc: None,
                open_files: 64,
                file_size_bytes: None,
            },
            cgroups: Vec::new(),
            hostname: "h".into(),
            identity: None,
            stage_timings: false,
            parent_pid: 1,
            warm: true,
            runtime: RuntimeKind::Namespaces,
            egress_port: None,
            one_shot: false,
        }
    }

    /// `hand` of `key` with `netns` to an early "launcher" that only waits: whether it was
    /// handed (sent) or refused.
    fn handed(key: &LaunchSpec, netns: Option<&OwnedFd>) -> bool {
        let sleeper = Launcher {
            program: "/bin/sleep".into(),
            args: vec!["60".into()],
        };
        EarlyLauncher::start(&sleeper)
            .unwrap()
            .hand(key, netns)
            .is_some()
    }

    #[test]
    fn only_a_warm_fully_isolated_spec_with_the_namespace_it_names_is_handed() {
        let namespace = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        assert!(handed(&key(), None));
        let join = LaunchSpec {
            network: Network::Join,
            ..key()
        };
        assert!(handed(&join, Some(&namespace)));
        assert!(!handed(&join, None), "a namespace to join, none sent");
        assert!(
            !handed(&key(), Some(&namespace)),
            "a namespace of its own, one sent"
        );
        let cold = LaunchSpec {
            warm: false,
            ..key()
        };
        assert!(
            !handed(&cold, None),
            "a cold spec needs the program's stdio at spawn"
        );
        let insecure = LaunchSpec {
            isolation: Isolation::InsecureNone,
            ..key()
        };
        assert!(!handed(&insecure, None));
    }
}
