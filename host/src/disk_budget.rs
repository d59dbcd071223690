//! Disk budgets: how much one call, and all calls together, may add to the
//! worktree. Pure accounting; [`crate::disk_guard`] charges it from the
//! WASI filesystem functions.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Bounds on what tools may add to the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskLimits {
    /// Bytes one call may write (including holes it opens in sparse files).
    pub call_bytes: u64,
    /// Files, directories and links one call may create.
    pub call_entries: u64,
    /// Largest size a tool may give a file (by writing or `set-size`).
    pub max_file_size: u64,
    /// Bytes all calls of the server's life may write together.
    pub worktree_bytes: u64,
    /// Entries all calls of the server's life may create together.
    pub worktree_entries: u64,
}

impl Default for DiskLimits {
    fn default() -> Self {
        DiskLimits {
            call_bytes: 64 << 20,
            call_entries: 10_000,
            max_file_size: 256 << 20,
            worktree_bytes: 1 << 30,
            worktree_entries: 100_000,
        }
    }
}

/// Which bound a call ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    CallBytes(u64),
    CallEntries(u64),
    FileSize(u64),
    WorktreeBytes(u64),
    WorktreeEntries(u64),
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exceeded::CallBytes(n) => {
                write!(f, "more than {n} bytes written in one call (--max-write-bytes)")
            }
            Exceeded::CallEntries(n) => write!(
                f,
                "more than {n} files or directories created in one call (--max-files-created)"
            ),
            Exceeded::FileSize(n) => write!(f, "a file larger than {n} bytes (--max-file-size)"),
            Exceeded::WorktreeBytes(n) => write!(
                f,
                "more than {n} bytes written to the worktree by all calls (--worktree-write-bytes)"
            ),
            Exceeded::WorktreeEntries(n) => write!(
                f,
                "more than {n} entries created in the worktree by all calls (--worktree-files-created)"
            ),
        }
    }
}

/// What one filesystem operation adds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub bytes: u64,
    pub entries: u64,
}

impl Cost {
    pub fn bytes(bytes: u64) -> Self {
        Cost { bytes, entries: 0 }
    }
    pub fn entry() -> Self {
        Cost {
            bytes: 0,
            entries: 1,
        }
    }
}

/// Totals of one worktree across the server's life (shared by all calls).
#[derive(Debug, Default)]
pub struct WorktreeUsage {
    bytes: AtomicU64,
    entries: AtomicU64,
}

impl WorktreeUsage {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }
}

/// The budget of one call. Cheap to clone (one `Arc`): output streams hold
/// a clone to charge their writes.
#[derive(Debug, Clone)]
pub struct CallBudget(Arc<CallState>);

#[derive(Debug)]
struct CallState {
    limits: DiskLimits,
    bytes: AtomicU64,
    entries: AtomicU64,
    worktree: Arc<WorktreeUsage>,
    exceeded: OnceLock<Exceeded>,
    /// The guest tried to change the worktree through a read-only grant.
    denied: AtomicBool,
}

/// Adds `n` to `counter` unless that passes `cap`.
fn add_within(counter: &AtomicU64, n: u64, cap: u64) -> bool {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            v.checked_add(n).filter(|t| *t <= cap)
        })
        .is_ok()
}

impl CallBudget {
    pub fn new(limits: DiskLimits, worktree: Arc<WorktreeUsage>) -> Self {
        CallBudget(Arc::new(CallState {
            limits,
            bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            worktree,
            exceeded: OnceLock::new(),
            denied: AtomicBool::new(false),
        }))
    }

    /// Bytes and entries this call has added so far (what it was charged).
    pub fn written(&self) -> Cost {
        Cost {
            bytes: self.0.bytes.load(Ordering::Relaxed),
            entries: self.0.entries.load(Ordering::Relaxed),
        }
    }

    /// Remembers that the guest tried to write where its grant is read-only.
    pub fn deny(&self) {
        self.0.denied.store(true, Ordering::Relaxed);
    }

    /// Did the guest try to write where its grant is read-only?
    pub fn denied(&self) -> bool {
        self.0.denied.load(Ordering::Relaxed)
    }

    pub fn limits(&self) -> &DiskLimits {
        &self.0.limits
    }

    /// The first bound this call ran into, if any.
    pub fn exceeded(&self) -> Option<Exceeded> {
        self.0.exceeded.get().copied()
    }

    /// Refuses (and remembers) a file growing past the size limit.
    /// `old_len` is its size now, `new_end` the end of the write.
    pub fn check_file_size(&self, old_len: u64, new_end: u64) -> Result<(), Exceeded> {
        let max = self.0.limits.max_file_size;
        if new_end > max && new_end > old_len {
            return Err(self.refuse(Exceeded::FileSize(max)));
        }
        Ok(())
    }

    /// Takes `cost` from the call's and the worktree's budget, or takes
    /// nothing and reports the bound it would pass.
    pub fn charge(&self, cost: Cost) -> Result<Charge, Exceeded> {
        let s = &*self.0;
        let l = &s.limits;
        if !add_within(&s.bytes, cost.bytes, l.call_bytes) {
            return Err(self.refuse(Exceeded::CallBytes(l.call_bytes)));
        }
        let mut charge = Charge {
            budget: self.clone(),
            cost: Cost::bytes(cost.bytes),
            worktree: Cost::default(),
        };
        if !add_within(&s.entries, cost.entries, l.call_entries) {
            charge.refund();
            return Err(self.refuse(Exceeded::CallEntries(l.call_entries)));
        }
        charge.cost = cost;
        if !add_within(&s.worktree.bytes, cost.bytes, l.worktree_bytes) {
            charge.refund();
            return Err(self.refuse(Exceeded::WorktreeBytes(l.worktree_bytes)));
        }
        charge.worktree = Cost::bytes(cost.bytes);
        if !add_within(&s.worktree.entries, cost.entries, l.worktree_entries) {
            charge.refund();
            return Err(self.refuse(Exceeded::WorktreeEntries(l.worktree_entries)));
        }
        charge.worktree = cost;
        Ok(charge)
    }

    fn refuse(&self, e: Exceeded) -> Exceeded {
        let _ = self.0.exceeded.set(e);
        e
    }
}

/// What [`CallBudget::charge`] took; [`Charge::refund`] gives it back when
/// the operation failed and added nothing.
#[must_use]
pub struct Charge {
    budget: CallBudget,
    cost: Cost,
    worktree: Cost,
}

impl Charge {
    pub fn refund(&mut self) {
        let s = &*self.budget.0;
        s.bytes.fetch_sub(self.cost.bytes, Ordering::Relaxed);
        s.entries.fetch_sub(self.cost.entries, Ordering::Relaxed);
        s.worktree
            .bytes
            .fetch_sub(self.worktree.bytes, Ordering::Relaxed);
        s.worktree
            .entries
            .fetch_sub(self.worktree.entries, Ordering::Relaxed);
        self.cost = Cost::default();
        self.worktree = Cost::default();
    }

    /// Keeps the charge if `result` is a success, refunds it otherwise.
    pub fn settle<T, E>(mut self, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.refund();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limits: DiskLimits) -> (CallBudget, Arc<WorktreeUsage>) {
        let usage = Arc::new(WorktreeUsage::default());
        (CallBudget::new(limits, usage.clone()), usage)
    }

    fn small() -> DiskLimits {
        DiskLimits {
            call_bytes: 100,
            call_entries: 2,
            max_file_size: 50,
            worktree_bytes: 150,
            worktree_entries: 3,
        }
    }

    #[test]
    fn call_bytes_are_capped_and_a_refused_charge_takes_nothing() {
        let (b, usage) = budget(small());
        let _a = b.charge(Cost::bytes(60)).unwrap();
        assert_eq!(
            b.charge(Cost::bytes(41)).err(),
            Some(Exceeded::CallBytes(100))
        );
        assert_eq!(usage.bytes(), 60);
        let _c = b.charge(Cost::bytes(40)).unwrap();
        assert_eq!(b.exceeded(), Some(Exceeded::CallBytes(100)));
    }

    #[test]
    fn worktree_totals_span_calls() {
        let usage = Arc::new(WorktreeUsage::default());
        let first = CallBudget::new(small(), usage.clone());
        let _ = first.charge(Cost::bytes(100)).unwrap();
        let second = CallBudget::new(small(), usage.clone());
        assert_eq!(
            second.charge(Cost::bytes(51)).err(),
            Some(Exceeded::WorktreeBytes(150))
        );
        assert_eq!(first.exceeded(), None);
        assert_eq!(usage.bytes(), 100);
    }

    #[test]
    fn entries_are_capped_per_call_and_per_worktree() {
        let usage = Arc::new(WorktreeUsage::default());
        let one = CallBudget::new(small(), usage.clone());
        let _ = one.charge(Cost::entry()).unwrap();
        let _ = one.charge(Cost::entry()).unwrap();
        assert_eq!(
            one.charge(Cost::entry()).err(),
            Some(Exceeded::CallEntries(2))
        );
        let two = CallBudget::new(small(), usage.clone());
        let _ = two.charge(Cost::entry()).unwrap();
        assert_eq!(
            two.charge(Cost::entry()).err(),
            Some(Exceeded::WorktreeEntries(3))
        );
        assert_eq!(usage.entries(), 3);
    }

    #[test]
    fn refund_on_failure_gives_everything_back() {
        let (b, usage) = budget(small());
        let c = b
            .charge(Cost {
                bytes: 10,
                entries: 1,
            })
            .unwrap();
        assert!(c.settle(Err::<(), ()>(())).is_err());
        assert_eq!((usage.bytes(), usage.entries()), (0, 0));
        let _ = b
            .charge(Cost {
                bytes: 100,
                entries: 2,
            })
            .unwrap();
    }

    #[test]
    fn file_size_allows_rewrites_inside_an_existing_large_file() {
        let (b, _) = budget(small());
        assert!(b.check_file_size(0, 50).is_ok());
        assert_eq!(b.check_file_size(0, 51), Err(Exceeded::FileSize(50)));
        assert!(b.check_file_size(1000, 900).is_ok());
        assert_eq!(b.check_file_size(1000, 1001), Err(Exceeded::FileSize(50)));
    }

    #[test]
    fn huge_costs_do_not_overflow() {
        let (b, _) = budget(DiskLimits::default());
        let _ = b.charge(Cost::bytes(10)).unwrap();
        assert!(b.charge(Cost::bytes(u64::MAX)).is_err());
    }
}
