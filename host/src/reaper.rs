//! Dropping a finished call's store off the call's path.
//!
//! Dropping a pooled store resets its instance slot: a `PAGEMAP_SCAN` of
//! the slot's linear memory, a `memset` of every page still present (up to
//! what the pool keeps resident) and an `madvise` of the rest. That is work
//! for the next call of the slot, not for the caller waiting on this one's
//! answer, so a call hands its store to a [`Reaper`]: one thread at idle
//! priority (`SCHED_IDLE` on Linux, the scheduler's lowest weight: it runs
//! on a core nothing else wants, and gets only a sliver of a busy one, so
//! it is slowed, never stopped, by load) that drops what it is given, in
//! order.
//!
//! The queue is bounded ([`RETIRING`]): when it is full (the reaper is
//! starved by a busy machine, or slow on one store's drop) the caller drops
//! its store itself, as if there were no reaper. So the stores waiting here
//! and the one being dropped hold at most [`RETIRING_SLOTS`] instance slots,
//! which the pool has on top of those of calls, loads and spares
//! (`Limits::instance_slots`): an admitted call never finds it exhausted,
//! and a plugin whose store is slow to drop delays no other plugin's more
//! than it would without the reaper. A store keeps what it holds (its
//! memory, up to the call's limit; its open files, counted in
//! `Limits::open_files_needed` through the same slots) until it is
//! dropped.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Stores that may wait for the reaper at once.
pub const RETIRING: usize = 2;

/// Instance slots the reaper may hold: the stores waiting and the one it is
/// dropping.
pub const RETIRING_SLOTS: usize = RETIRING + 1;

/// A thread that drops what it is given, at idle priority (module docs).
/// Dropping the reaper drops everything still queued and waits for it.
pub struct Reaper<T: Send + 'static> {
    queue: Option<SyncSender<T>>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Reaper<T> {
    /// Starts the thread. Without one (the system refused it), every
    /// [`Reaper::retire`] drops on the caller's thread.
    pub fn start() -> Self {
        let (queue, items) = sync_channel::<T>(RETIRING);
        let thread = std::thread::Builder::new()
            .name("wasm-mcp-reaper".into())
            .spawn(move || {
                lower_priority();
                for item in items {
                    drop(item);
                }
            });
        match thread {
            Ok(thread) => Reaper {
                queue: Some(queue),
                thread: Some(thread),
            },
            Err(e) => {
                tracing::warn!("no reaper thread ({e}): stores are dropped by their calls");
                Reaper {
                    queue: None,
                    thread: None,
                }
            }
        }
    }

    /// Has `item` dropped by the reaper, or right here when the reaper's
    /// queue is full or it is gone.
    pub fn retire(&self, item: T) {
        let Some(queue) = &self.queue else {
            return drop(item);
        };
        match queue.try_send(item) {
            Ok(()) => {}
            Err(TrySendError::Full(item) | TrySendError::Disconnected(item)) => drop(item),
        }
    }
}

impl<T: Send + 'static> Drop for Reaper<T> {
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The calling thread runs only when a core is otherwise idle. Best effort:
/// where the system refuses, the reaper runs at normal priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the call; pid 0 is
        // the calling thread.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if rc != 0 {
            tracing::debug!(
                "reaper left at normal priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    /// Counts its drops and names the thread that dropped it.
    struct Counted {
        drops: Arc<AtomicUsize>,
        dropped_on: Arc<std::sync::Mutex<Vec<String>>>,
        /// Waited on when dropped (to hold the reaper up).
        hold: Option<Arc<Barrier>>,
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            if let Some(b) = &self.hold {
                b.wait();
            }
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.dropped_on.lock().unwrap().push(name);
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted(hold: Option<Arc<Barrier>>) -> (Counted, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let item = Counted {
            drops: drops.clone(),
            dropped_on: Default::default(),
            hold,
        };
        (item, drops)
    }

    fn wait_for(drops: &AtomicUsize, n: usize) {
        let t = Instant::now();
        while drops.load(Ordering::SeqCst) < n {
            assert!(t.elapsed() < Duration::from_secs(10), "never dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_retired_item_is_dropped_on_the_reaper_thread() {
        let reaper = Reaper::start();
        let (item, drops) = counted(None);
        let on = item.dropped_on.clone();
        reaper.retire(item);
        wait_for(&drops, 1);
        assert_eq!(*on.lock().unwrap(), ["wasm-mcp-reaper"]);
    }

    #[test]
    fn a_full_queue_drops_on_the_caller_and_holds_at_most_its_slots() {
        let reaper = Reaper::start();
        // The first item holds the reaper in its drop until released.
        let hold = Arc::new(Barrier::new(2));
        let (first, first_drops) = counted(Some(hold.clone()));
        reaper.retire(first);
        // Retire until one is dropped right here: the queue is full.
        let probe_drops = Arc::new(AtomicUsize::new(0));
        let probe_on = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut retired = 0;
        let t = Instant::now();
        while probe_drops.load(Ordering::SeqCst) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the queue never filled"
            );
            reaper.retire(Counted {
                drops: probe_drops.clone(),
                dropped_on: probe_on.clone(),
                hold: None,
            });
            retired += 1;
        }
        assert_eq!(*probe_on.lock().unwrap(), [current_name()]);
        // Not yet dropped: the first and the probes queued behind it, at
        // most the slots the pool keeps for the reaper.
        assert_eq!(first_drops.load(Ordering::SeqCst), 0);
        let waiting = retired; // the first, and every probe but the last
        assert!(waiting <= RETIRING_SLOTS, "{waiting} held");
        assert!(
            waiting >= RETIRING,
            "{waiting} held: the queue is too short"
        );
        hold.wait();
        wait_for(&probe_drops, retired);
        let on = probe_on.lock().unwrap();
        assert_eq!(
            on.iter().filter(|n| *n == "wasm-mcp-reaper").count(),
            retired - 1
        );
    }

    fn current_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    #[test]
    fn dropping_the_reaper_drops_what_is_still_queued() {
        let reaper = Reaper::start();
        let hold = Arc::new(Barrier::new(2));
        let (first, first_drops) = counted(Some(hold.clone()));
        reaper.retire(first);
        let (second, second_drops) = counted(None);
        reaper.retire(second);
        let release = std::thread::spawn(move || hold.wait());
        drop(reaper);
        release.join().unwrap();
        assert_eq!(first_drops.load(Ordering::SeqCst), 1);
        assert_eq!(second_drops.load(Ordering::SeqCst), 1);
    }
}
