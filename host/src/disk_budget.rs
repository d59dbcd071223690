//! Disk budgets: how much one call, one plugin's calls and all calls
//! together may add to the worktree, and how many files one call may hold
//! open. Pure accounting;
//! [`crate::disk_guard`] charges it from the WASI filesystem functions.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// Bytes one plugin's calls may write over the server's life: its
    /// share of `worktree_bytes`.
    pub plugin_bytes: Share,
    /// Entries one plugin's calls may create: its share of
    /// `worktree_entries`.
    pub plugin_entries: Share,
    /// Files (descriptors) and directory listings one call may hold open at
    /// once: each file is a descriptor of the server process, whose limit
    /// every plugin shares, and each listing a copy of its directory in
    /// host memory.
    pub call_open_files: u64,
}

/// A plugin's share of a worktree total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Share {
    /// An even part of the total: divided by the most plugins that have
    /// published a tool that may write to the worktree (over the server's
    /// life), rounded up; alone, the whole of it. Plugins that fill theirs
    /// leave every other its own, however many there are.
    #[default]
    Even,
    /// This much, never more than the total, whether or not other plugins
    /// may write (`--plugin-write-bytes`, a grant's `plugin_write_bytes`).
    Set(u64),
}

/// As the audit log shows it: `"even"`, or the bytes or entries set.
impl serde::Serialize for Share {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Share::Even => s.serialize_str("even"),
            Share::Set(n) => s.serialize_u64(*n),
        }
    }
}

impl Share {
    /// `Set(n)` when `told` is, else the default even part.
    pub fn told(told: Option<u64>) -> Share {
        told.map_or(Share::Even, Share::Set)
    }

    /// The cap this share puts on a plugin's part of `total`, `writers`
    /// plugins having published a tool that may write to the worktree;
    /// none (`u64::MAX`) where it would be the whole total, so that a
    /// refusal there names the worktree's bound, the one to raise.
    fn cap(self, total: u64, writers: usize) -> u64 {
        let part = match self {
            Share::Even => total.div_ceil(writers.max(1) as u64),
            Share::Set(n) => n,
        };
        if part < total {
            part
        } else {
            u64::MAX
        }
    }
}

impl Default for DiskLimits {
    fn default() -> Self {
        DiskLimits {
            call_bytes: 64 << 20,
            call_entries: 10_000,
            max_file_size: 256 << 20,
            worktree_bytes: 1 << 30,
            worktree_entries: 100_000,
            plugin_bytes: Share::Even,
            plugin_entries: Share::Even,
            call_open_files: 256,
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
    PluginBytes(u64),
    PluginEntries(u64),
    OpenFiles(u64),
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
            Exceeded::PluginBytes(n) => write!(
                f,
                "more than {n} bytes written to the worktree by this plugin's calls \
                 (its share: --plugin-write-bytes or its grant's plugin_write_bytes; \
                 by default an even part of the worktree's among the plugins that may write there)"
            ),
            Exceeded::PluginEntries(n) => write!(
                f,
                "more than {n} entries created in the worktree by this plugin's calls \
                 (its share: --plugin-files-created or its grant's plugin_files_created; \
                 by default an even part of the worktree's among the plugins that may write there)"
            ),
            Exceeded::OpenFiles(n) => write!(
                f,
                "more than {n} files, read streams and directory listings (one per 512 entries) held open at once by this call (--max-open-files)"
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

/// Bytes written and entries created, counted up against caps.
#[derive(Debug, Default)]
pub struct Totals {
    bytes: AtomicU64,
    entries: AtomicU64,
}

/// Which of the two counts of [`Totals`] a cost would take past its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    Bytes,
    Entries,
}

impl Totals {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// Adds `cost` unless that takes a count past its cap in `cap`; then
    /// adds nothing.
    fn take(&self, cost: Cost, cap: Cost) -> Result<(), Counted> {
        if !add_within(&self.bytes, cost.bytes, cap.bytes) {
            return Err(Counted::Bytes);
        }
        if !add_within(&self.entries, cost.entries, cap.entries) {
            self.bytes.fetch_sub(cost.bytes, Ordering::Relaxed);
            return Err(Counted::Entries);
        }
        Ok(())
    }

    fn give_back(&self, cost: Cost) {
        self.bytes.fetch_sub(cost.bytes, Ordering::Relaxed);
        self.entries.fetch_sub(cost.entries, Ordering::Relaxed);
    }
}

/// Totals of one worktree across the server's life (shared by all calls
/// of all plugins), and how many loaded plugins may write there.
#[derive(Debug, Default)]
pub struct WorktreeUsage {
    totals: Totals,
    writers: AtomicUsize,
}

impl WorktreeUsage {
    pub fn bytes(&self) -> u64 {
        self.totals.bytes()
    }
    pub fn entries(&self) -> u64 {
        self.totals.entries()
    }

    /// Notes that `n` plugins publish a tool that may write to the
    /// worktree (each catalog the server publishes tells it). Shares
    /// ([`DiskLimits::plugin_bytes`]) are parts of the most there have
    /// been, for the rest of the server's life, as the totals are: a
    /// writer gone for a while (a reload that failed, a load retried) must
    /// not leave another free to take its part.
    pub fn note_writers(&self, n: usize) {
        self.writers.fetch_max(n, Ordering::Relaxed);
    }

    fn writers(&self) -> usize {
        self.writers.load(Ordering::Relaxed)
    }
}

/// Which budget a bound belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Call,
    Plugin,
    Worktree,
}

impl DiskLimits {
    /// Whether calls under these limits can add anything at all to the
    /// worktree (bytes to a file, or an entry): a plugin that cannot takes
    /// no part of the worktree's totals from the others.
    pub fn may_add(&self) -> bool {
        let bytes =
            self.call_bytes.min(self.worktree_bytes) > 0 && self.plugin_bytes != Share::Set(0);
        let entries = self.call_entries.min(self.worktree_entries) > 0
            && self.plugin_entries != Share::Set(0);
        bytes || entries
    }

    /// The caps of `scope`'s budget, `writers` plugins having published a
    /// tool that may write to the worktree.
    fn caps(&self, scope: Scope, writers: usize) -> Cost {
        let (bytes, entries) = match scope {
            Scope::Call => (self.call_bytes, self.call_entries),
            Scope::Plugin => (
                self.plugin_bytes.cap(self.worktree_bytes, writers),
                self.plugin_entries.cap(self.worktree_entries, writers),
            ),
            Scope::Worktree => (self.worktree_bytes, self.worktree_entries),
        };
        Cost { bytes, entries }
    }
}

impl Scope {
    /// The bound of this budget, whose caps are `cap`, that `counted` names.
    fn exceeded(self, counted: Counted, cap: Cost) -> Exceeded {
        match (self, counted) {
            (Scope::Call, Counted::Bytes) => Exceeded::CallBytes(cap.bytes),
            (Scope::Call, Counted::Entries) => Exceeded::CallEntries(cap.entries),
            (Scope::Plugin, Counted::Bytes) => Exceeded::PluginBytes(cap.bytes),
            (Scope::Plugin, Counted::Entries) => Exceeded::PluginEntries(cap.entries),
            (Scope::Worktree, Counted::Bytes) => Exceeded::WorktreeBytes(cap.bytes),
            (Scope::Worktree, Counted::Entries) => Exceeded::WorktreeEntries(cap.entries),
        }
    }
}

/// The budget of one call. Cheap to clone (one `Arc`): output streams hold
/// a clone to charge their writes.
#[derive(Debug, Clone)]
pub struct CallBudget(Arc<CallState>);

#[derive(Debug)]
struct CallState {
    limits: DiskLimits,
    call: Totals,
    /// What the calling plugin's calls have added over the server's life.
    plugin: Arc<Totals>,
    worktree: Arc<WorktreeUsage>,
    exceeded: OnceLock<Exceeded>,
    /// The guest tried to change the worktree through a read-only grant.
    denied: AtomicBool,
    /// Files, streams and directory listings the guest holds open (a
    /// listing counts by its size).
    open_files: AtomicU64,
    /// What each counted descriptor or listing counts in `open_files`, by
    /// its resource's rep (reps are unique among a store's live
    /// resources): only these give anything back when dropped.
    held: std::sync::Mutex<std::collections::HashMap<u32, u64>>,
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
    /// A call's budget, charged to its plugin's totals `plugin` and the
    /// worktree's `worktree` too.
    pub fn new(limits: DiskLimits, plugin: Arc<Totals>, worktree: Arc<WorktreeUsage>) -> Self {
        CallBudget(Arc::new(CallState {
            limits,
            call: Totals::default(),
            plugin,
            worktree,
            exceeded: OnceLock::new(),
            denied: AtomicBool::new(false),
            open_files: AtomicU64::new(0),
            held: Default::default(),
        }))
    }

    /// Bytes and entries this call has added so far (what it was charged).
    pub fn written(&self) -> Cost {
        Cost {
            bytes: self.0.call.bytes(),
            entries: self.0.call.entries(),
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

    /// Takes `cost` from the call's, its plugin's and the worktree's
    /// budgets, or takes nothing and reports the bound it would pass. The
    /// plugin's is counted always; its default share caps it only while
    /// the worktree has more than one writer, so one plugin alone may use
    /// the whole of it.
    pub fn charge(&self, cost: Cost) -> Result<Charge, Exceeded> {
        let s = &*self.0;
        let (l, writers) = (&s.limits, s.worktree.writers());
        let budgets = [
            (&s.call, Scope::Call),
            (&*s.plugin, Scope::Plugin),
            (&s.worktree.totals, Scope::Worktree),
        ];
        for (i, (totals, scope)) in budgets.iter().enumerate() {
            let caps = l.caps(*scope, writers);
            if let Err(counted) = totals.take(cost, caps) {
                budgets[..i].iter().for_each(|(t, _)| t.give_back(cost));
                return Err(self.refuse(scope.exceeded(counted, caps)));
            }
        }
        Ok(Charge {
            budget: self.clone(),
            cost,
        })
    }

    /// Counts a file or stream about to be opened, or refuses (and
    /// remembers) one more than `call_open_files`.
    pub fn open_file(&self) -> Result<(), Exceeded> {
        self.open_files(1)
    }

    /// Counts `n` open files' worth (a listing counts by its size), or
    /// refuses (and remembers) going past `call_open_files`.
    pub fn open_files(&self, n: u64) -> Result<(), Exceeded> {
        let max = self.0.limits.call_open_files;
        if add_within(&self.0.open_files, n, max) {
            Ok(())
        } else {
            Err(self.refuse(Exceeded::OpenFiles(max)))
        }
    }

    /// A file or stream counted by [`CallBudget::open_file`] was closed,
    /// or failed to open.
    pub fn close_file(&self) {
        self.close_files(1);
    }

    /// `n` counted by [`CallBudget::open_files`] are closed.
    pub fn close_files(&self, n: u64) {
        let _ = self
            .0
            .open_files
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
    }

    /// The resource `rep` (a descriptor or a listing) holds `n` counted:
    /// given back when it is dropped ([`CallBudget::dropped`]).
    pub fn held_by(&self, rep: u32, n: u64) {
        self.0.held.lock().unwrap().insert(rep, n);
    }

    /// The resource `rep` was dropped: what it counted, if anything, is
    /// given back. A resource never counted gives nothing back: dropping
    /// the worktree's preopen handles, which `get-directories` hands out
    /// anew at each call, took the count back to zero with files still
    /// open (20,000 held past a bound of 256; a helper's find).
    pub fn dropped(&self, rep: u32) {
        let n = self.0.held.lock().unwrap().remove(&rep).unwrap_or(0);
        self.close_files(n);
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
}

impl Charge {
    pub fn refund(&mut self) {
        let s = &*self.budget.0;
        for totals in [&s.call, &*s.plugin, &s.worktree.totals] {
            totals.give_back(self.cost);
        }
        self.cost = Cost::default();
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
        (
            CallBudget::new(limits, Arc::default(), usage.clone()),
            usage,
        )
    }

    /// A call of the plugin whose totals are `plugin`.
    fn call_of(plugin: &Arc<Totals>, usage: &Arc<WorktreeUsage>) -> CallBudget {
        CallBudget::new(small(), plugin.clone(), usage.clone())
    }

    fn small() -> DiskLimits {
        DiskLimits {
            call_bytes: 100,
            call_entries: 2,
            max_file_size: 50,
            worktree_bytes: 150,
            worktree_entries: 3,
            plugin_bytes: Share::Even,
            plugin_entries: Share::Even,
            call_open_files: 2,
        }
    }

    #[test]
    fn open_files_are_capped_while_held() {
        let (b, _) = budget(small());
        b.open_file().unwrap();
        b.open_file().unwrap();
        assert_eq!(b.open_file(), Err(Exceeded::OpenFiles(2)));
        b.close_file();
        b.open_file().unwrap();
        for _ in 0..5 {
            b.close_file();
        }
        b.open_file().unwrap();
        b.open_file().unwrap();
        assert_eq!(
            b.open_file(),
            Err(Exceeded::OpenFiles(2)),
            "closing more than was opened frees nothing more"
        );
        assert_eq!(b.exceeded(), Some(Exceeded::OpenFiles(2)));
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
        let first = CallBudget::new(small(), Arc::default(), usage.clone());
        let _ = first.charge(Cost::bytes(100)).unwrap();
        let second = CallBudget::new(small(), Arc::default(), usage.clone());
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
        let one = CallBudget::new(small(), Arc::default(), usage.clone());
        let _ = one.charge(Cost::entry()).unwrap();
        let _ = one.charge(Cost::entry()).unwrap();
        assert_eq!(
            one.charge(Cost::entry()).err(),
            Some(Exceeded::CallEntries(2))
        );
        let two = CallBudget::new(small(), Arc::default(), usage.clone());
        let _ = two.charge(Cost::entry()).unwrap();
        assert_eq!(
            two.charge(Cost::entry()).err(),
            Some(Exceeded::WorktreeEntries(3))
        );
        assert_eq!(usage.entries(), 3);
    }

    #[test]
    fn a_plugin_is_held_to_its_share_while_another_may_write() {
        let usage = Arc::new(WorktreeUsage::default());
        let (a, b) = (Arc::new(Totals::default()), Arc::new(Totals::default()));
        // Alone, a plugin may use the whole worktree budget.
        usage.note_writers(1);
        let _ = call_of(&a, &usage).charge(Cost::bytes(90)).unwrap();
        assert_eq!(a.bytes(), 90);
        // Once another may write, it is over its share of 75: refused.
        usage.note_writers(2);
        let over = call_of(&a, &usage);
        assert_eq!(
            over.charge(Cost::bytes(1)).err(),
            Some(Exceeded::PluginBytes(75))
        );
        assert_eq!(over.written(), Cost::default(), "a refusal takes nothing");
        assert_eq!((a.bytes(), usage.bytes()), (90, 90));
        // The other plugin still has the rest of the worktree's 150.
        let _ = call_of(&b, &usage).charge(Cost::bytes(60)).unwrap();
        assert_eq!(
            call_of(&b, &usage).charge(Cost::bytes(1)).err(),
            Some(Exceeded::WorktreeBytes(150))
        );
        // Entries the same way, and a refused entry gives its bytes back.
        let c = Arc::new(Totals::default());
        let _ = call_of(&c, &usage).charge(Cost::entry()).unwrap();
        let _ = call_of(&c, &usage).charge(Cost::entry()).unwrap();
        let third = call_of(&c, &usage);
        let both = Cost {
            bytes: 0,
            entries: 1,
        };
        assert_eq!(third.charge(both).err(), Some(Exceeded::PluginEntries(2)));
        assert_eq!((c.entries(), usage.entries()), (2, 2));
    }

    #[test]
    fn a_shared_worktree_stays_shared() {
        let usage = Arc::new(WorktreeUsage::default());
        let a = Arc::new(Totals::default());
        usage.note_writers(2);
        // The other writer is gone (a reload that failed): still shared.
        usage.note_writers(1);
        assert_eq!(
            call_of(&a, &usage).charge(Cost::bytes(76)).err(),
            Some(Exceeded::PluginBytes(75))
        );
        // A share told as much as the worktree's total or more leaves the
        // refusal to the total, the bound to raise.
        let wide = DiskLimits {
            call_bytes: 1000,
            plugin_bytes: Share::Set(1000),
            ..small()
        };
        let b = CallBudget::new(wide, Arc::default(), usage.clone());
        assert_eq!(
            b.charge(Cost::bytes(151)).err(),
            Some(Exceeded::WorktreeBytes(150))
        );
    }

    #[test]
    fn a_share_told_holds_a_plugin_alone_too() {
        let usage = Arc::new(WorktreeUsage::default());
        usage.note_writers(1);
        let told = DiskLimits {
            plugin_bytes: Share::Set(40),
            plugin_entries: Share::Set(0),
            ..small()
        };
        let b = CallBudget::new(told, Arc::default(), usage.clone());
        let _ = b.charge(Cost::bytes(40)).unwrap();
        assert_eq!(
            b.charge(Cost::bytes(1)).err(),
            Some(Exceeded::PluginBytes(40))
        );
        assert_eq!(
            b.charge(Cost::entry()).err(),
            Some(Exceeded::PluginEntries(0))
        );
        assert_eq!((usage.bytes(), usage.entries()), (40, 0));
    }

    #[test]
    fn a_refund_gives_back_to_the_plugin_too() {
        let usage = Arc::new(WorktreeUsage::default());
        usage.note_writers(2);
        let a = Arc::new(Totals::default());
        let call = call_of(&a, &usage);
        let c = call.charge(Cost::bytes(75)).unwrap();
        assert!(c.settle(Err::<(), ()>(())).is_err());
        assert_eq!((a.bytes(), usage.bytes(), call.written().bytes), (0, 0, 0));
        let _ = call.charge(Cost::bytes(75)).unwrap();
    }

    #[test]
    fn shares_are_even_parts_unless_told() {
        assert_eq!(Share::told(None), Share::Even);
        assert_eq!(Share::Even.cap(1 << 30, 2), 1 << 29);
        assert_eq!(Share::Even.cap(5, 2), 3);
        assert_eq!(Share::Even.cap(10, 3), 4);
        assert_eq!(Share::Even.cap(5, 1), u64::MAX);
        assert_eq!(Share::Even.cap(5, 0), u64::MAX);
        assert_eq!(Share::told(Some(7)).cap(100, 1), 7);
        assert_eq!(Share::Set(700).cap(100, 2), u64::MAX, "the total bounds it");
        assert_eq!(Share::Even.cap(1, 2), u64::MAX, "half of 1 is all of it");
        let d = DiskLimits::default();
        assert_eq!(
            (d.plugin_bytes, d.plugin_entries),
            (Share::Even, Share::Even)
        );
    }

    #[test]
    fn limits_that_let_nothing_be_added_say_so() {
        assert!(small().may_add());
        let zero = |bytes, entries| DiskLimits {
            plugin_bytes: Share::Set(bytes),
            plugin_entries: Share::Set(entries),
            ..small()
        };
        assert!(!zero(0, 0).may_add());
        assert!(zero(1, 0).may_add(), "bytes into existing files");
        assert!(zero(0, 1).may_add(), "an empty file");
        let no_call = DiskLimits {
            call_bytes: 0,
            call_entries: 0,
            ..small()
        };
        assert!(!no_call.may_add());
        let shown = serde_json::json!([Share::Even, Share::Set(7)]);
        assert_eq!(shown.to_string(), r#"["even",7]"#);
    }

    #[test]
    fn writers_that_fill_their_parts_leave_every_other_its_own() {
        let usage = Arc::new(WorktreeUsage::default());
        usage.note_writers(3);
        let plugins: Vec<Arc<Totals>> = (0..3).map(|_| Arc::default()).collect();
        // Two fill their thirds of 150 (50 each), in calls of 10.
        for p in &plugins[..2] {
            for _ in 0..5 {
                let _ = call_of(p, &usage).charge(Cost::bytes(10)).unwrap();
            }
            assert_eq!(
                call_of(p, &usage).charge(Cost::bytes(1)).err(),
                Some(Exceeded::PluginBytes(50))
            );
        }
        // The third still has its own 50, then its share stops it (not the
        // worktree total).
        let _ = call_of(&plugins[2], &usage)
            .charge(Cost::bytes(50))
            .unwrap();
        assert_eq!(
            call_of(&plugins[2], &usage).charge(Cost::bytes(1)).err(),
            Some(Exceeded::PluginBytes(50))
        );
        assert_eq!(usage.bytes(), 150);
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
