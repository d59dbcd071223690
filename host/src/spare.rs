//! Spare instances: a plugin's next instance, made right after one of its
//! calls ends, so that the next call does not wait for instantiation.
//!
//! What stays true with spares:
//! - **One instance, one call.** A spare is moved out of its slot by the
//!   call that takes it and dropped with that call's store; nothing is
//!   ever put back. Nothing of one call reaches the next.
//! - **No guest code outside a call.** Instantiating a component runs only
//!   the start functions of its core modules; a plugin that has one never
//!   gets a spare ([`runs_code_at_instantiation`]), so no guest code runs
//!   between calls (nothing can write to the worktree after the agent's
//!   last call, for one).
//! - **The call's rights, the call's limits.** A spare is taken only by a
//!   call under the plugin's own grant with the filesystem it was built
//!   with (read-only, read-write or none), from the code it was made from
//!   (a tier-up leaves it unused); the call's deadline replaces the
//!   spare's, and its store's memory and disk budgets are as fresh as a
//!   new store's. A grant narrowed to subdirectories gets no spares: they
//!   are opened when a store is built, and must be opened at the call.
//! - **Bounded.** At most one spare per plugin and filesystem (a plugin
//!   whose tools read and write finds one for either), each holding one
//!   of the server's `--spare-instances` slots (the instance pool has room
//!   for them beside every call and load slot); one is built at a time per
//!   plugin, after a call, so spares cost at most one instantiation per
//!   call. A spare that fails to build turns them off for that plugin, as
//!   do [`SLOW_BUILDS_IN_A_ROW`] builds past [`BUILD_LIMIT`] (one, on a
//!   loaded machine, only skips a call).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{Store, Trap};

use crate::grants::{Filesystem, Grant};
use crate::plugin::{until, Plugin, ToolPlugin, ToolPluginPre};
use crate::sandbox::{Sandbox, StoreState};

/// The longest a spare may take to build (it runs no guest code, so only
/// a machine under heavy load comes near).
pub const BUILD_LIMIT: Duration = Duration::from_secs(1);

/// Builds past [`BUILD_LIMIT`], one after the other, that turn a plugin's
/// spares off.
pub const SLOW_BUILDS_IN_A_ROW: u32 = 3;

/// How building a spare ended.
pub enum Built {
    Ready(Spare),
    /// Past [`BUILD_LIMIT`]: tried again after a later call.
    TooSlow,
    /// Failed: no more spares for this plugin.
    Failed,
}

/// A store and an instance in it that no call has used yet.
pub struct Spare {
    /// The code it is an instance of.
    pub code: Arc<ToolPluginPre<StoreState>>,
    pub fs: Filesystem,
    pub store: Store<StoreState>,
    pub instance: ToolPlugin,
    /// Its slot among the server's spares.
    pub slot: OwnedSemaphorePermit,
}

/// One plugin's spares: at most one for each filesystem its calls get, so
/// a plugin whose tools read and write (an agent's usual mix) finds one
/// for either.
pub struct Spares {
    /// False for a plugin whose instantiation runs guest code, or whose
    /// spare failed to build.
    allowed: AtomicBool,
    /// Builds past [`BUILD_LIMIT`] since the last one that was not.
    slow_in_a_row: AtomicU32,
    state: Mutex<State>,
}

/// The spares and whether one is being built, changed together (a build
/// that ends is seen as a spare ready and no build running at once).
struct State {
    /// By [`slot_of`] their filesystem.
    ready: [Option<Spare>; 3],
    /// One is being built (one at a time per plugin).
    building: bool,
}

/// Where the spare for calls with `fs` is kept.
fn slot_of(fs: Filesystem) -> usize {
    match fs {
        Filesystem::None => 0,
        Filesystem::ReadOnly => 1,
        Filesystem::ReadWrite => 2,
    }
}

impl Spares {
    pub fn new(allowed: bool) -> Spares {
        Spares {
            allowed: AtomicBool::new(allowed),
            slow_in_a_row: AtomicU32::new(0),
            state: Mutex::new(State {
                ready: [None, None, None],
                building: false,
            }),
        }
    }

    /// The spare for calls with the filesystem `fs`, if it is an instance
    /// of `code` (one of older code, left by a tier-up, is dropped).
    pub fn take(
        &self,
        code: &Arc<ToolPluginPre<StoreState>>,
        fs: Filesystem,
    ) -> Option<(Store<StoreState>, ToolPlugin)> {
        let spare = self.lock().ready[slot_of(fs)].take()?;
        debug_assert!(spare.fs == fs);
        if Arc::ptr_eq(&spare.code, code) {
            return Some((spare.store, spare.instance));
        }
        drop(spare);
        None
    }

    /// Whether a spare is waiting for a call with the filesystem `fs`.
    pub fn is_ready(&self, fs: Filesystem) -> bool {
        self.lock().ready[slot_of(fs)].is_some()
    }

    /// Whether a spare for calls with `fs` under `grant` may be built now;
    /// if so, the caller builds it and then calls [`Spares::built`] (or
    /// [`Spares::cancel_building`]).
    pub fn start_building(&self, grant: &Grant, fs: Filesystem) -> bool {
        if !self.allowed.load(Ordering::Relaxed) || grant.paths.is_some() {
            return false;
        }
        let mut state = self.lock();
        let start = !state.building && state.ready[slot_of(fs)].is_none();
        state.building |= start;
        start
    }

    /// Ends what [`Spares::start_building`] began: keeps the spare, or
    /// turns spares off for this plugin after a failure or after
    /// [`SLOW_BUILDS_IN_A_ROW`] slow builds.
    pub fn built(&self, built: Built) {
        let spare = match built {
            Built::Ready(spare) => spare,
            Built::TooSlow => {
                let slow = self.slow_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
                if slow >= SLOW_BUILDS_IN_A_ROW {
                    self.allowed.store(false, Ordering::Relaxed);
                }
                return self.cancel_building();
            }
            Built::Failed => {
                self.allowed.store(false, Ordering::Relaxed);
                return self.cancel_building();
            }
        };
        self.slow_in_a_row.store(0, Ordering::Relaxed);
        let previous = {
            let mut state = self.lock();
            state.building = false;
            state.ready[slot_of(spare.fs)].replace(spare)
        };
        drop(previous);
    }

    /// Ends [`Spares::start_building`] having built nothing.
    pub fn cancel_building(&self) {
        self.lock().building = false;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The spare side of [`Plugin`]: taking a spare for a call, and building
/// the next one after it.
impl Plugin {
    /// This plugin's spare for a call under `grant` with `fs`, if one is
    /// ready for it (only calls under the plugin's own grant take one).
    pub(crate) fn spare_for(
        &self,
        code: &Arc<ToolPluginPre<StoreState>>,
        grant: &Grant,
        fs: Filesystem,
    ) -> Option<(Store<StoreState>, ToolPlugin)> {
        if !std::ptr::eq(grant, &*self.grant) {
            return None;
        }
        self.spares.take(code, fs)
    }

    /// Whether a spare instance is waiting for this plugin's next call
    /// with the filesystem `fs`.
    pub fn spare_ready(&self, fs: Filesystem) -> bool {
        self.spares.is_ready(fs)
    }

    /// The spare a call with `fs` under this plugin's grant would take now
    /// (`None`: none is ready for it): what such a call waits for instead
    /// of instantiating (used by the benchmarks).
    pub fn take_spare(&self, fs: Filesystem) -> Option<(Store<StoreState>, ToolPlugin)> {
        self.spares.take(&self.pre(), fs)
    }

    /// After a call with the filesystem `fs` under the plugin's grant:
    /// builds the plugin's next instance for such calls in the background,
    /// unless one is ready or being built, spares are off for it, or every
    /// one of the server's spare slots is in use.
    pub fn prepare_spare(self: &Arc<Self>, sandbox: &Arc<Sandbox>, fs: Filesystem) {
        if !self.spares.start_building(&self.grant, fs) {
            return;
        }
        let Some(slot) = sandbox.spare_slot() else {
            // Not a failure of this plugin: try again after its next call.
            return self.spares.cancel_building();
        };
        let (plugin, sandbox) = (self.clone(), sandbox.clone());
        tokio::spawn(async move {
            let spare = plugin.build_spare(&sandbox, fs, slot).await;
            plugin.spares.built(spare);
        });
    }

    async fn build_spare(
        &self,
        sandbox: &Sandbox,
        fs: Filesystem,
        slot: OwnedSemaphorePermit,
    ) -> Built {
        let code = self.pre();
        let deadline = Instant::now() + sandbox.limits().timeout.min(BUILD_LIMIT);
        let built = async {
            let mut store = sandbox.new_store_for(
                code.engine(),
                &self.grant,
                fs,
                &self.disk_usage,
                deadline,
            )?;
            let instance = until(deadline, code.instantiate_async(&mut store)).await?;
            anyhow::Ok((store, instance))
        };
        match built.await {
            Ok((store, instance)) => Built::Ready(Spare {
                code,
                fs,
                store,
                instance,
                slot,
            }),
            Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {
                tracing::debug!(plugin = %self.name, "a spare instance took over {BUILD_LIMIT:?} to build");
                Built::TooSlow
            }
            Err(e) => {
                tracing::info!(plugin = %self.name, "no spare instances for this plugin: {e:#}");
                Built::Failed
            }
        }
    }
}

/// Whether instantiating the component in `bytes` runs any of its code: a
/// core module (at any depth) with a start function, or a component start
/// (or bytes that do not parse: assumed to).
pub fn runs_code_at_instantiation(bytes: &[u8]) -> bool {
    use wasmparser::{Parser, Payload};
    Parser::new(0).parse_all(bytes).any(|payload| {
        matches!(
            payload,
            Err(_) | Ok(Payload::StartSection { .. } | Payload::ComponentStartSection { .. })
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{runs_code_at_instantiation, Built, Spares, SLOW_BUILDS_IN_A_ROW};
    use crate::grants::{Filesystem, Grant};
    use crate::Limits;

    /// A build past its limit (a loaded machine) skips one call's spare;
    /// only several in a row, or one that fails, turn spares off.
    #[test]
    fn slow_builds_are_tried_again_and_failed_ones_are_not() {
        let grant = Grant::server(&Limits::default(), Filesystem::ReadOnly);
        let fs = Filesystem::ReadOnly;
        let spares = Spares::new(true);
        for _ in 1..SLOW_BUILDS_IN_A_ROW {
            assert!(spares.start_building(&grant, fs));
            assert!(!spares.start_building(&grant, fs), "one build at a time");
            spares.built(Built::TooSlow);
        }
        assert!(spares.start_building(&grant, fs));
        spares.built(Built::TooSlow);
        assert!(
            !spares.start_building(&grant, fs),
            "off after {SLOW_BUILDS_IN_A_ROW} in a row"
        );

        let spares = Spares::new(true);
        assert!(spares.start_building(&grant, fs));
        spares.built(Built::Failed);
        assert!(!spares.start_building(&grant, fs), "off after a failure");
    }

    fn wasm(text: &str) -> Vec<u8> {
        wat::parse_str(text).unwrap()
    }

    #[test]
    fn start_functions_are_found_at_any_depth() {
        assert!(!runs_code_at_instantiation(&wasm(
            "(component (core module (func (export \"f\"))))"
        )));
        assert!(runs_code_at_instantiation(&wasm(
            "(component (core module (func $s) (start $s)))"
        )));
        assert!(runs_code_at_instantiation(&wasm(
            "(component (component (core module) (core module (func $s) (start $s))))"
        )));
        assert!(runs_code_at_instantiation(b"\0asm\x0d\0\x01\0garbage"));
    }
}
