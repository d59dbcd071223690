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
//! client's.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

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
    if slot.alone {
        tokio::select! {
            biased;
            out = &mut call => return Some(out),
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
}
