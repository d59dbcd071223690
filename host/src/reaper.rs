//! Dropping a finished call's store off the call's path.
//!
//! Dropping a pooled store resets its instance slot: a `PAGEMAP_SCAN` of
//! the slot's linear memory, a `memset` of every page still present (up to
//! what the pool keeps resident) and an `madvise` of the rest. That is work
//! for the next call of the slot, not for the caller waiting on this one's
//! answer, so a call hands its store to a [`Reaper`]: one thread that
//! drops what it is given, in order, at idle priority (`SCHED_IDLE` on
//! Linux, the scheduler's lowest weight: it runs on a core nothing else
//! wants, and gets only a sliver of a busy one, so it is slowed, never
//! stopped, by load). It waits for work at normal priority, and drops what
//! is left at normal priority once the server ends
//! (`drop_at_idle_priority`).
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

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
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
    /// The thread's id, once it runs (0 before).
    tid: Arc<AtomicI32>,
    /// Set when the reaper is dropped: what is left is dropped at normal
    /// priority.
    ending: Arc<AtomicBool>,
}

impl<T: Send + 'static> Reaper<T> {
    /// Starts the thread. Without one (the system refused it), every
    /// [`Reaper::retire`] drops on the caller's thread.
    pub fn start() -> Self {
        let (queue, items) = sync_channel::<T>(RETIRING);
        let tid = Arc::new(AtomicI32::new(0));
        let ending = Arc::new(AtomicBool::new(false));
        let (its_tid, its_end) = (tid.clone(), ending.clone());
        let thread = std::thread::Builder::new()
            .name("wasm-mcp-reaper".into())
            .spawn(move || {
                its_tid.store(this_thread_id(), Ordering::SeqCst);
                for item in items {
                    drop_at_idle_priority(item, &its_end);
                }
            });
        match thread {
            Ok(thread) => Reaper {
                queue: Some(queue),
                thread: Some(thread),
                tid,
                ending,
            },
            Err(e) => {
                tracing::warn!("no reaper thread ({e}): stores are dropped by their calls");
                Reaper {
                    queue: None,
                    thread: None,
                    tid,
                    ending,
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
    /// What is still queued is dropped at normal priority: the server is
    /// ending, and an idle-priority reaper on a busy machine made it wait.
    fn drop(&mut self) {
        drop(self.queue.take());
        self.ending.store(true, Ordering::SeqCst);
        let tid = self.tid.load(Ordering::SeqCst);
        if tid != 0 {
            set_idle(tid, false);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Drops `item` at idle priority, unless the reaper is `ending`. The
/// thread waits for work at normal priority: a thread of the lowest weight
/// is the last of a killed process to run on a busy machine, and the last
/// one tears the process down (its memory, its files) at its own weight: a
/// server killed with 2 busy loops on the machine took 0.9 s to exit, where
/// it took 0.05 s with the reaper waiting at normal priority.
fn drop_at_idle_priority<T>(item: T, ending: &AtomicBool) {
    if ending.load(Ordering::SeqCst) {
        return drop(item);
    }
    set_idle(0, true);
    drop(item);
    set_idle(0, false);
}

/// Puts thread `tid` (0: the calling one) at idle priority, or back at
/// normal. Best effort: where the system refuses, the reaper runs at
/// normal priority.
fn set_idle(tid: i32, idle: bool) {
    #[cfg(target_os = "linux")]
    {
        let policy = if idle {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the call; `tid` is
        // the reaper's thread (alive until joined) or 0, the caller.
        let rc = unsafe { libc::sched_setscheduler(tid, policy, &param) };
        if rc != 0 {
            tracing::debug!(
                idle,
                "reaper priority unchanged: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (tid, idle);
}

/// The calling thread's kernel id (0 where there is none to give).
fn this_thread_id() -> i32 {
    #[cfg(target_os = "linux")]
    return rustix::thread::gettid().as_raw_nonzero().get();
    #[cfg(not(target_os = "linux"))]
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Barrier;
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

    /// The scheduling policy of thread `tid` of this process (field 41 of
    /// its `stat`: 0 normal, 5 idle).
    #[cfg(target_os = "linux")]
    fn policy_of(tid: i32) -> u32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // Fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(41 - 3).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    fn wait_for_policy(tid: i32, policy: u32) {
        let t = Instant::now();
        while policy_of(tid) != policy {
            assert!(t.elapsed() < Duration::from_secs(10), "never {policy}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Idle priority while it drops, normal while it waits, and normal
    /// for what is left once it is dropped.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_reaper_drops_at_idle_priority_and_waits_at_normal() {
        let reaper = Reaper::start();
        let t = Instant::now();
        let tid = loop {
            match reaper.tid.load(Ordering::SeqCst) {
                0 => assert!(t.elapsed() < Duration::from_secs(10), "no tid"),
                tid => break tid,
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let (normal, idle) = (0, 5);
        assert_eq!(policy_of(tid), normal);
        let hold = Arc::new(Barrier::new(2));
        let (held, drops) = counted(Some(hold.clone()));
        reaper.retire(held);
        wait_for_policy(tid, idle);
        hold.wait();
        wait_for(&drops, 1);
        wait_for_policy(tid, normal);
        // Dropping it puts it back at normal priority mid-drop.
        let (held, drops) = counted(Some(hold.clone()));
        reaper.retire(held);
        wait_for_policy(tid, idle);
        let dropper = std::thread::spawn(move || drop(reaper));
        wait_for_policy(tid, normal);
        hold.wait();
        dropper.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
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
