//! Which host uid an environment's sandboxes run as: picked at random from the configured
//! range and claimed in the id files ([`crate::uids`]) so that no two environments share one,
//! across processes; given to environments made before hookbox mapped sandboxed root.

use super::*;

/// How many host ids an environment of `runtime` holds.
pub(super) fn id_span(runtime: RuntimeKind) -> u32 {
    match runtime {
        RuntimeKind::Namespaces => 1,
        RuntimeKind::Gvisor => hookbox_sandbox::gvisor::ID_SPAN,
    }
}

/// The host ids an environment of `runtime` whose sandboxes run as `uid` holds.
pub(super) fn id_range(uid: u32, runtime: RuntimeKind) -> crate::uids::Range {
    crate::uids::Range {
        start: u64::from(uid),
        end: u64::from(uid) + u64::from(id_span(runtime)),
    }
}

/// Serialises uid allocation within this process (the claim files settle it across processes).
pub(super) static UID_ALLOCATION: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Environments {
    /// Picks an unused id of `range` for a new environment: random, claimed in the id files
    /// ([`crate::uids`]) so that environments never share a host uid, across processes too.
    /// The cost does not grow with the number of environments (once the ids of environments
    /// made before the files existed are entered).
    ///
    /// An environment holds `span` ids from its own on (gVisor maps a range, see
    /// [`hookbox_sandbox::gvisor::ID_SPAN`]); ranges start on a multiple of the span from the range's
    /// first id and never overlap another environment's ids. The caller releases the claim
    /// ([`Self::release_identity`]) if the environment is not made after all.
    pub(super) fn allocate_identity(&self, range: UidRange, span: u32) -> Result<Identity> {
        let claims = crate::uids::Claims::new(&self.root);
        if !claims.complete() {
            let taken: Vec<crate::uids::Range> = self
                .list()?
                .into_iter()
                .filter_map(|m| Some(id_range(m.sandbox_uid?, m.runtime)))
                .collect();
            claims.backfill(&taken).map_err(io(&self.root))?;
        }
        let slots = u64::from(range.count / span.max(1));
        let mut rng = rand::rng();
        for _ in 0..64 {
            if slots == 0 {
                break;
            }
            let candidate = range.nth(rng.random_range(0..slots) * u64::from(span));
            let claim = crate::uids::Range {
                start: u64::from(candidate.uid),
                end: u64::from(candidate.uid) + u64::from(span),
            };
            if claims.try_claim(claim).map_err(io(&self.root))? {
                return Ok(candidate);
            }
        }
        Err(EnvError::Meta {
            path: self.root.clone(),
            message: format!(
                "no free sandbox uid in {}..{} (64 random picks were taken); widen the range",
                range.first,
                u64::from(range.first) + u64::from(range.count),
            ),
        })
    }

    /// Gives back the ids [`Self::allocate_identity`] claimed for an environment of `runtime`.
    pub(super) fn release_identity(&self, identity: Identity, runtime: RuntimeKind) {
        crate::uids::Claims::new(&self.root).release(id_range(identity.uid, runtime));
    }
}

impl Environments {
    /// The identity `meta`'s sandboxes run as. An environment created before hookbox mapped
    /// sandboxed root to an unprivileged uid (or by an unprivileged hookbox) gets one now: its
    /// tree is given to the new uid and the choice recorded, once.
    pub(super) fn identity_of(
        &self,
        dir: &Path,
        meta: &mut EnvironmentMeta,
    ) -> Result<Option<Identity>> {
        let Some(range) = self.options.identities() else {
            return Ok(None);
        };
        if let Some(uid) = meta.sandbox_uid {
            return Ok(Some(Identity { uid, gid: uid }));
        }
        let _allocating = UID_ALLOCATION.lock().ok();
        let identity = self.allocate_identity(range, id_span(meta.runtime))?;
        let given = give_to(dir, meta.frozen_hooks, identity).and_then(|()| {
            // `meta` is what `open_env_with` just read from disk, unredacted.
            meta.sandbox_uid = Some(identity.uid);
            write_meta(dir, meta)
        });
        if let Err(err) = given {
            meta.sandbox_uid = None;
            self.release_identity(identity, meta.runtime);
            return Err(err);
        }
        tracing::info!(env_id = %meta.id, uid = identity.uid, "environment given an unprivileged sandbox uid");
        Ok(Some(identity))
    }
}

/// Gives an environment's tree, and its frozen snapshot when it has one, to `identity`: what
/// hookbox (or git, or cp) wrote there as host root becomes the sandbox's own.
pub(super) fn give_to(dir: &Path, frozen: bool, identity: Identity) -> Result<()> {
    let Identity { uid, gid } = identity;
    RootDir::open(&dir.join(TREE_DIR))?.chown_tree(uid, gid)?;
    if frozen {
        RootDir::open(&dir.join(FROZEN_DIR))?.chown_tree(uid, gid)?;
    }
    Ok(())
}
