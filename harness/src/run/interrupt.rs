//! Stopping a run on request (Ctrl-C / SIGTERM).
//!
//! The first signal fires a [`Stop`]: the agent loop starts no new round,
//! calls in flight get `notifications/cancelled`, and the run shuts down in
//! its usual order (close MCP, persist trace, commit the work, remove the
//! worktree); the binary then exits 130. A second signal exits at once
//! (work committed before it stays committed: the branch ref is updated
//! atomically).

use std::time::Duration;

use tokio::sync::watch;

/// Exit status of an interrupted run (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// How long a cancelled call may take to wind down before it is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

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
        let mut seen = 0u32;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            seen += 1;
            if seen == 1 {
                trigger.fire();
                on_first();
            } else {
                eprintln!("interrupted twice: exiting now");
                std::process::exit(EXIT_INTERRUPTED.into());
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
