//! Stopping a run on request (Ctrl-C / SIGTERM).
//!
//! The first signal fires a [`Stop`]: the agent loop starts no new round,
//! calls in flight get `notifications/cancelled`, and the run shuts down in
//! its usual order (close MCP, persist trace, commit the work, remove the
//! worktree); the binary then exits 130. A second signal exits at once
//! (work committed before it stays committed: the branch ref is updated
//! atomically), unless it comes within [`SAME_INTERRUPTION`] of the first:
//! one stop request often arrives as two signals (GNU `timeout`, and CI
//! runners and init systems, signal the process and then its whole group;
//! a wrapper forwards SIGTERM while the terminal sends SIGINT), and such a
//! run exited without committing its work (a helper's find).

use std::time::Duration;

use tokio::sync::watch;

/// Exit status of an interrupted run (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// How long a cancelled call may take to wind down before it is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Signals within this long of the first are the same stop request.
pub const SAME_INTERRUPTION: Duration = Duration::from_millis(500);

/// What to do before a second signal exits the process at once.
type ExitHook = Box<dyn Fn() + Send>;
static BEFORE_EXIT_NOW: std::sync::Mutex<Vec<ExitHook>> = std::sync::Mutex::new(Vec::new());

/// Runs `hook` when a second signal exits the process at once (not on a
/// normal end): for what must not be left behind, such as a tool's `.git`
/// at a worktree's root, which the user's `git status` would take (a
/// helper's find). A hook must be quick and may find its work done.
pub fn before_exit_now(hook: impl Fn() + Send + 'static) {
    let mut hooks = BEFORE_EXIT_NOW.lock().unwrap_or_else(|e| e.into_inner());
    hooks.push(Box::new(hook));
}

fn exit_now() -> ! {
    eprintln!("interrupted twice: exiting now");
    if let Ok(hooks) = BEFORE_EXIT_NOW.try_lock() {
        for hook in hooks.iter() {
            hook();
        }
    }
    std::process::exit(EXIT_INTERRUPTED.into());
}

/// Observes the stop request. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<bool>);

/// Fires the [`Stop`]s made with it.
#[derive(Clone, Debug)]
pub struct StopTrigger(std::sync::Arc<watch::Sender<bool>>);

/// A connected trigger and stop.
pub fn stop_pair() -> (StopTrigger, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopTrigger(std::sync::Arc::new(tx)), Stop(rx))
}

impl StopTrigger {
    pub fn fire(&self) {
        self.0.send_replace(true);
    }
}

impl Stop {
    /// A stop that never fires.
    pub fn never() -> Self {
        let (_tx, rx) = watch::channel(false);
        Stop(rx)
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the stop fires (never for [`Stop::never`]).
    pub async fn fired(&self) {
        let mut rx = self.0.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Listen for SIGINT and SIGTERM: the first fires `trigger` (and calls
/// `on_first`), the second exits the process at once with status 130.
pub fn on_signals(
    trigger: StopTrigger,
    on_first: impl Fn() + Send + 'static,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(tokio::spawn(async move {
        let mut first = None;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            match Signal::after(first, std::time::Instant::now()) {
                Signal::First(at) => {
                    first = Some(at);
                    trigger.fire();
                    on_first();
                }
                Signal::SameAsFirst => {}
                Signal::Second => exit_now(),
            }
        }
    }))
}

/// What a signal received `now` is, the first having come `first`.
#[derive(Debug, PartialEq, Eq)]
enum Signal {
    First(std::time::Instant),
    SameAsFirst,
    Second,
}

impl Signal {
    fn after(first: Option<std::time::Instant>, now: std::time::Instant) -> Signal {
        match first {
            None => Signal::First(now),
            Some(at) if now.duration_since(at) < SAME_INTERRUPTION => Signal::SameAsFirst,
            Some(_) => Signal::Second,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_signal_soon_after_the_first_is_the_same_request() {
        let t0 = std::time::Instant::now();
        assert_eq!(Signal::after(None, t0), Signal::First(t0));
        let soon = t0 + Duration::from_millis(1);
        assert_eq!(Signal::after(Some(t0), soon), Signal::SameAsFirst);
        let later = t0 + SAME_INTERRUPTION;
        assert_eq!(Signal::after(Some(t0), later), Signal::Second);
    }

    #[tokio::test]
    async fn fired_resolves_after_fire_and_never_otherwise() {
        let (t, s) = stop_pair();
        assert!(!s.is_set());
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.fired().await }
        });
        t.fire();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(s.is_set());
        let never = Stop::never();
        let r = tokio::time::timeout(Duration::from_millis(50), never.fired()).await;
        assert!(r.is_err());
    }
}
