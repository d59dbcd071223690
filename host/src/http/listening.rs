//! 2025-11-25 sessions stay alive while their client listens.
//!
//! rmcp ends a session after its idle time (`--session-idle-secs`, 5
//! minutes by default) with no request, even while its client holds the
//! session's GET stream open: the Python and TypeScript SDKs (1.x) do, and
//! after five quiet minutes their next call failed "Session not found",
//! neither starting a new session (a helper's find). A session whose GET
//! stream is open is in use; one with none (its client gone without a
//! DELETE) still ends when idle, so abandoned sessions do not fill
//! `--max-sessions`.
//!
//! How: each GET stream is counted while its response body lives, and a
//! ticker touches every session with one open (a request-wise channel
//! opened and closed at once: two events to the session's worker, which
//! reset its idle timer and change nothing else) three times per idle time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager,
};

/// Open GET streams, by session id.
#[derive(Default)]
pub struct Listening(Mutex<HashMap<String, usize>>);

/// One open GET stream of a session, counted until dropped.
pub struct Listener {
    listening: Arc<Listening>,
    session: String,
}

impl Listening {
    /// Counts a GET stream of `session` while the returned value lives.
    pub fn open(self: &Arc<Self>, session: &str) -> Listener {
        *self
            .0
            .lock()
            .unwrap()
            .entry(session.to_owned())
            .or_default() += 1;
        Listener {
            listening: self.clone(),
            session: session.to_owned(),
        }
    }

    fn sessions(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut open = self.listening.0.lock().unwrap();
        if let Some(n) = open.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

/// Touches every session with a GET stream open, three times per `idle`,
/// for as long as the server runs. Each touch is its own task, given up
/// after a tick: a session whose worker is stuck (writing to a client that
/// reads nothing) held up the touches of every other session, which then
/// ended while their clients listened (a helper's find).
pub fn keep_alive(
    listening: Arc<Listening>,
    sessions: Arc<LocalSessionManager>,
    idle: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = (idle / 3).max(Duration::from_millis(100));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            for id in listening.sessions() {
                let handle = sessions.sessions.read().await.get(id.as_str()).cloned();
                if let Some(handle) = handle {
                    tokio::spawn(tokio::time::timeout(period, touch(handle)));
                }
            }
        }
    })
}

/// Resets the idle timer of `session`'s worker: a request-wise channel
/// opened and closed at once.
async fn touch(session: LocalSessionHandle) {
    if let Ok(channel) = session.establish_request_wise_channel().await {
        if let Some(http_id) = channel.http_request_id {
            let _ = session.close_request_wise_channel(http_id).await;
        }
    }
}
