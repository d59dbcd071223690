//! Who hears about tool-list changes: every 2025-11-25 session that
//! initialized, and every open 2026-07-28 `subscriptions/listen` request
//! that asked for `toolsListChanged`, on any transport. The watcher calls
//! [`Listeners::tools_changed`] once per change and each gets it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

/// One receiver of `notifications/tools/list_changed`.
#[derive(Clone)]
enum Target {
    /// A 2025-11-25 session (initialize handshake done): notified on its peer.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 `subscriptions/listen` stream: notified through its sink
    /// (which tags the subscription id).
    Subscription(SubscriptionSink),
}

/// How long a receiver has to take a notification. All are sent at once,
/// so one that does not read its stream (its transport's buffer full)
/// delays the others by this at most; a session that missed it is dropped
/// from the set (it hears of no later change either).
pub const DELIVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Open `subscriptions/listen` streams one server holds at most (over all
/// connections); each costs a task and a slot here until it is cancelled.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

/// The live set of receivers, shared by every clone of the server.
#[derive(Default)]
pub struct Listeners {
    targets: Mutex<Vec<(u64, Target)>>,
    next_id: AtomicU64,
    /// Cancelled when the server is ending (input closed, or a signal):
    /// open listen streams complete then ([`Listeners::end_streams`]).
    ending: CancellationToken,
}

/// Keeps a subscription registered; dropping it (the listen request ended)
/// removes it.
pub struct Registration {
    listeners: Arc<Listeners>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.listeners.remove(self.id);
    }
}

impl Listeners {
    fn add(&self, target: Target) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.targets.lock().unwrap().push((id, target));
    }

    fn remove(&self, id: u64) {
        self.targets.lock().unwrap().retain(|(i, _)| *i != id);
    }

    /// A 2025-11-25 session; it stays until its transport closes (closed
    /// ones are dropped here and when a notification fails).
    pub fn add_session(&self, peer: Peer<RoleServer>) {
        self.targets.lock().unwrap().retain(|(_, t)| match t {
            Target::Session(p) => !p.is_transport_closed(),
            Target::Subscription(_) => true,
        });
        self.add(Target::Session(peer));
    }

    /// A `subscriptions/listen` stream, registered while the returned
    /// guard lives; `None` when [`MAX_SUBSCRIPTIONS`] are open.
    pub fn subscribe(self: &Arc<Self>, sink: SubscriptionSink) -> Option<Registration> {
        let mut targets = self.targets.lock().unwrap();
        let open = targets
            .iter()
            .filter(|(_, t)| matches!(t, Target::Subscription(_)))
            .count();
        if open >= MAX_SUBSCRIPTIONS {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        targets.push((id, Target::Subscription(sink)));
        Some(Registration {
            listeners: self.clone(),
            id,
        })
    }

    /// Every open listen stream completes now, with its final result (the
    /// 2026-07-28 graceful closure): the server is ending. They were left
    /// to time out instead: a stdio server waited 5 s after its input
    /// closed (rmcp draining in-flight requests), which the Inspector and
    /// the Python SDK 2.x, both leaving a listen open, met at every exit.
    pub fn end_streams(&self) {
        self.ending.cancel();
    }

    /// Waits until [`Listeners::end_streams`] (at once if it was called).
    pub async fn streams_ended(&self) {
        self.ending.cancelled().await
    }

    /// How many receivers are registered now.
    pub fn len(&self) -> usize {
        self.targets.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends `notifications/tools/list_changed` to every receiver; drops
    /// sessions whose transport is gone. Returns how many were reached.
    pub async fn tools_changed(&self) -> usize {
        let targets: Vec<(u64, Target)> = self.targets.lock().unwrap().clone();
        let mut sends = tokio::task::JoinSet::new();
        for (id, target) in targets {
            sends.spawn(async move {
                let sent = tokio::time::timeout(DELIVERY_TIMEOUT, target.notify()).await;
                let sent = sent.unwrap_or_else(|_| Err("not taken in time".into()));
                (id, matches!(target, Target::Session(_)), sent)
            });
        }
        let mut reached = 0;
        while let Some(done) = sends.join_next().await {
            let Ok((id, session, sent)) = done else {
                continue;
            };
            match sent {
                Ok(()) => reached += 1,
                Err(e) => {
                    tracing::debug!("list_changed not delivered: {e}");
                    if session {
                        self.remove(id);
                    }
                }
            }
        }
        tracing::info!(reached, "sent notifications/tools/list_changed");
        reached
    }
}

impl Target {
    async fn notify(&self) -> Result<(), String> {
        match self {
            Target::Session(peer) if peer.is_transport_closed() => Err("session closed".into()),
            Target::Session(peer) => peer
                .notify_tool_list_changed()
                .await
                .map_err(|e| e.to_string()),
            Target::Subscription(sink) => sink
                .notify_tool_list_changed()
                .await
                .map_err(|e| e.to_string()),
        }
    }
}
