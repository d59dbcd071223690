//! Which thread a tool call runs on.
//!
//! `wasm-mcp` reads and answers requests on one runtime thread (the
//! connection's: [`crate::block_on`] starts one worker). A call that finds
//! no other call in flight runs right there, so a client calling one tool
//! at a time never waits for a thread to wake up: on the project's 2-core
//! VM a hand-off to another worker and back cost ~55 µs of a ~0.28 ms small
//! call (the bench's `sequential` section, one worker against the default
//! two). A call that arrives while another runs goes to the call pool, a
//! runtime with one worker per core, so calls in flight still use every
//! core. A running guest yields to its executor at every epoch tick (with
//! tokio's `yield_now`, after which the runtime polls its I/O), so the
//! connection's thread keeps reading and writing frames while an inline
//! call runs, and a call still running at its first yield after
//! [`INLINE_FOR`] moves to the pool, so a long call holds up no other
//! client's. A step with no yield at all (one long instruction or host
//! operation) does hold the thread: after one past [`SLOW_INLINE_POLL`],
//! calls stop running inline for a while ([`INLINE_BACKOFF`], doubled at
//! each repeat).

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

mod run_queue;

/// Calls in flight in this process (all sessions and transports).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Where calls beyond the first in flight run (started by [`start_pool`]
/// or on first use, never dropped: a runtime cannot be dropped from async
/// code). `None`: it could not be started; calls run inline.
static POOL: OnceLock<Option<Runtime>> = OnceLock::new();

/// Starts the call pool now: the server does before it serves, so a
/// failure is its start's (building a runtime takes descriptors, and a
/// plugin's call holding the process's last ones made the first start,
/// on a second call in flight, panic, and that call was never answered).
pub fn start_pool() -> std::io::Result<()> {
    let mut failed = None;
    POOL.get_or_init(|| build_pool().map_err(|e| failed = Some(e)).ok());
    failed.map_or(Ok(()), Err)
}

/// How long a call alone runs on the connection's thread: one still running
/// at its first yield after this moves to the call pool. A guest that
/// computes yields only at each epoch tick, and between its slices the
/// connection's I/O waited: one such call made every other client's small
/// call take ~14 ms instead of ~0.5 (a helper's find).
const INLINE_FOR: std::time::Duration = std::time::Duration::from_millis(1);

/// One poll of an inline call that held the connection's thread longer
/// than this, computing or blocked in a host operation (guest code yields
/// at least every epoch tick, 5 ms; 20 ms let a 12 MiB fill per call
/// through, which doubled every other client's tail latency for good): a
/// single instruction no epoch check interrupts (one `memory.fill` over
/// 200 MiB of fresh pages, ~100 ms), or one long host operation. A client
/// calling such a tool one call at a time, each call alone and so inline,
/// made every other client's request wait ~100× longer (a helper's find).
/// After one, no call runs inline for [`INLINE_BACKOFF`], doubled at each
/// repeat up to [`MAX_INLINE_BACKOFF`]: such a plugin holds the
/// connection once in a long while, not at its caller's rate.
///
/// Held, not wall time: the poll's wall time less the time its thread
/// waited for a CPU ([`run_queue`]). On a busy 2-core machine a 1.9 MB
/// `read_file` (~4 ms of CPU in one poll: the guest, then the host's lift
/// and check of its result) was preempted past 8 ms of wall time in about
/// one server of two in the bench, taken for a plugin holding the thread,
/// and every small call after it paid the pool's hand-off for 10 s, 20 s,
/// ... (p50 0.19 → 0.29–0.34 ms). CPU time alone would not do: a host
/// operation blocked in the kernel (writeback throttling, a journal wait,
/// a cold read) holds the thread without computing (a helper's find).
const SLOW_INLINE_POLL: Duration = Duration::from_millis(8);
const INLINE_BACKOFF: Duration = Duration::from_secs(10);
const MAX_INLINE_BACKOFF: Duration = Duration::from_secs(3600);

/// Inline calls are off until this, µs since [`process_start`].
static NO_INLINE_UNTIL: AtomicU64 = AtomicU64::new(0);
/// Slow inline polls so far.
static SLOW_POLLS: AtomicU32 = AtomicU32::new(0);

fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn micros_now() -> u64 {
    process_start().elapsed().as_micros() as u64
}

/// Whether a call alone may run inline now.
fn inline_allowed() -> bool {
    micros_now() >= NO_INLINE_UNTIL.load(Ordering::Acquire)
}

/// Counts a slow inline poll: inline calls are off for the backoff.
fn slow_inline_poll(took: Duration, held: Duration) {
    let n = SLOW_POLLS.fetch_add(1, Ordering::AcqRel);
    let backoff = INLINE_BACKOFF
        .saturating_mul(1u32 << n.min(16))
        .min(MAX_INLINE_BACKOFF);
    let until = micros_now() + backoff.as_micros() as u64;
    NO_INLINE_UNTIL.fetch_max(until, Ordering::AcqRel);
    tracing::warn!(
        took_ms = took.as_millis() as u64,
        held_ms = held.as_millis() as u64,
        off_for_s = backoff.as_secs(),
        "a call held the connection's thread in one step (one instruction or host \
         operation no deadline check interrupts): calls run on the call pool for a while"
    );
}

/// Polls `call` once, counting a poll that held the thread
/// ([`PollTimer::held_the_thread`]).
fn timed_poll<F: Future + ?Sized>(
    call: std::pin::Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<F::Output> {
    let timer = PollTimer::start();
    let polled = call.poll(cx);
    if let Some((took, held)) = timer.held_the_thread() {
        slow_inline_poll(took, held);
    }
    polled
}

/// The wall time of one poll on this thread, and its thread's wait for a
/// CPU when it began.
struct PollTimer {
    wall: Instant,
    waited: Option<Duration>,
}

impl PollTimer {
    fn start() -> PollTimer {
        PollTimer {
            wall: Instant::now(),
            waited: run_queue::waited(),
        }
    }

    /// The poll's wall time and the time it held the thread, if that is
    /// past [`SLOW_INLINE_POLL`]. (The wait is read again only past
    /// [`SLOW_INLINE_POLL`] of wall time.)
    fn held_the_thread(self) -> Option<(Duration, Duration)> {
        let took = self.wall.elapsed();
        if took <= SLOW_INLINE_POLL {
            return None;
        }
        let held = held_time(took, self.waited, run_queue::waited());
        (held > SLOW_INLINE_POLL).then_some((took, held))
    }
}

/// Of a poll's wall time `took`, the part its thread was not waiting for a
/// CPU (the run-queue wait read before and after it). All of it when the
/// wait is not known.
fn held_time(took: Duration, before: Option<Duration>, after: Option<Duration>) -> Duration {
    let waited = match (before, after) {
        (Some(before), Some(after)) => after.saturating_sub(before),
        _ => Duration::ZERO,
    };
    took.saturating_sub(waited)
}

/// Runs `call` inline when it is the only call in flight (moving it to the
/// call pool if it runs past [`INLINE_FOR`]), else on the call
/// pool. `None`: the pool dropped the call (the process is shutting down).
/// Dropping the returned future ends the call wherever it runs; a panic in
/// the call is resumed here.
pub async fn run_call<F>(call: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let slot = InFlight::enter();
    let Some(pool) = pool() else {
        return Some(call.await);
    };
    let mut call = Box::pin(call);
    if slot.alone && inline_allowed() {
        let inline = std::future::poll_fn(|cx| timed_poll(call.as_mut(), cx));
        tokio::select! {
            biased;
            out = inline => return Some(out),
            () = tokio::time::sleep(INLINE_FOR) => {}
        }
    }
    let mut task = AbortOnDrop(pool.spawn(call));
    let out = match (&mut task.0).await {
        Ok(out) => Some(out),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    };
    drop(slot);
    out
}

fn pool() -> Option<&'static tokio::runtime::Handle> {
    let pool = POOL.get_or_init(|| match build_pool() {
        Ok(pool) => Some(pool),
        Err(e) => {
            tracing::warn!("calls run on the connection's thread: starting the call pool: {e}");
            None
        }
    });
    pool.as_ref().map(Runtime::handle)
}

fn build_pool() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("wasm-mcp-call")
        .enable_all()
        .build()
}

/// One call counted in [`IN_FLIGHT`] while it lives.
struct InFlight {
    alone: bool,
}

impl InFlight {
    fn enter() -> InFlight {
        InFlight {
            alone: IN_FLIGHT.fetch_add(1, Ordering::AcqRel) == 0,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A task that ends when this is dropped: a pool task when its awaiting
/// future is (the client cancelled, or the session ended), the HTTP
/// server's keep-alive task when serving ends.
pub(crate) struct AbortOnDrop<T>(pub(crate) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    // One test: the in-flight count is per process, shared by every test
    // in this binary that makes calls.
    #[test]
    fn a_lone_call_runs_inline_a_long_or_second_one_on_the_pool_and_a_dropped_one_stops() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("connection")
            .enable_all()
            .build()
            .unwrap();
        // Spawned: `block_on` itself runs on the test's thread.
        let scenario = rt.spawn(async {
            // Alone: on the caller's thread.
            let name = run_call(async { thread_name() }).await.unwrap();
            assert_eq!(name, "connection");

            // While one runs, the next goes to the pool; both finish.
            let (release, wait) = tokio::sync::oneshot::channel::<()>();
            let first = tokio::spawn(run_call(async move {
                let before = thread_name();
                let _ = wait.await;
                (before, thread_name())
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let second = run_call(async { thread_name() }).await.unwrap();
            assert_eq!(second, "wasm-mcp-call");
            release.send(()).unwrap();
            // The first began inline and, still running past INLINE_FOR
            // at its next yield, moved to the pool.
            let first = first.await.unwrap().unwrap();
            assert_eq!(first, ("connection".into(), "wasm-mcp-call".into()));

            // A pool call whose caller is dropped is aborted (its future
            // dropped), and the count goes back to zero.
            let (hold, held) = tokio::sync::oneshot::channel::<()>();
            let blocker = tokio::spawn(run_call(async move {
                let _ = held.await;
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let dropped = Arc::new(AtomicBool::new(false));
            struct Flag(Arc<AtomicBool>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let flag = Flag(dropped.clone());
            let pending = tokio::spawn(run_call(async move {
                let _flag = flag;
                std::future::pending::<()>().await
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
            pending.abort();
            let _ = pending.await;
            hold.send(()).unwrap();
            blocker.await.unwrap().unwrap();
            for _ in 0..100 {
                if dropped.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(
                dropped.load(Ordering::SeqCst),
                "the pool call was not dropped"
            );
            assert_eq!(IN_FLIGHT.load(Ordering::SeqCst), 0);

            // A panic in a pool call reaches the caller.
            let (hold, held) = tokio::sync::oneshot::channel::<()>();
            let blocker = tokio::spawn(run_call(async move {
                let _ = held.await;
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let panicked = tokio::spawn(run_call(async { panic!("guest host bug") })).await;
            assert!(panicked.unwrap_err().is_panic());
            hold.send(()).unwrap();
            blocker.await.unwrap().unwrap();
        });
        rt.block_on(scenario).unwrap();
    }

    #[test]
    fn a_poll_holds_the_thread_computing_or_blocked_not_waiting_for_a_cpu() {
        // Computing past the bound (spinning until this thread has held
        // its CPU that long, however often a loaded machine preempts it).
        let timer = PollTimer::start();
        let (started, waited) = (Instant::now(), run_queue::waited());
        while held_time(started.elapsed(), waited, run_queue::waited()) <= SLOW_INLINE_POLL * 2 {
            std::hint::spin_loop();
        }
        let (took, held) = timer.held_the_thread().expect("a computing poll");
        assert!(held > SLOW_INLINE_POLL && took >= held, "{took:?} {held:?}");

        // Blocked in a system call past the bound, computing nothing.
        let timer = PollTimer::start();
        std::thread::sleep(SLOW_INLINE_POLL * 2);
        let (took, held) = timer.held_the_thread().expect("a blocked poll");
        assert!(held > SLOW_INLINE_POLL, "{took:?} {held:?}");

        // Short: not held, whatever it did.
        let timer = PollTimer::start();
        assert_eq!(timer.held_the_thread(), None);

        // Waiting for a CPU is not holding the thread.
        let ms = Duration::from_millis;
        let (before, after) = (Some(ms(100)), Some(ms(112)));
        assert_eq!(held_time(ms(16), before, after), ms(4));
        assert_eq!(held_time(ms(16), before, Some(ms(90))), ms(16));
        assert_eq!(held_time(ms(16), None, after), ms(16));
        assert_eq!(held_time(ms(16), before, Some(ms(200))), Duration::ZERO);
    }
}
