//! Requests the stdio transport has read and not yet answered. Three
//! rules hang on this one record:
//!
//! - **Back-pressure.** At most [`MAX_UNANSWERED`] at once; past it the
//!   transport holds the requests it reads and stops reading once
//!   `stdio::MAX_HELD` of them wait for one to be answered (notifications
//!   are still read until then: a client at the bound can cancel), so a
//!   client that
//!   pipelines requests, or stops reading the answers, makes itself wait
//!   instead of growing the server's memory (40,000 pipelined calls held
//!   ~1.2 GB before; a frame each, unread, up to the output caps).
//!   `subscriptions/listen` streams stay open by design and are not counted
//!   (they have their own bound, `MAX_SUBSCRIPTIONS`).
//! - **Drain at the end of input.** When stdin ends, the server answers
//!   every request it has read before it exits (each ends by its deadline),
//!   so `wasm-mcp serve < requests.jsonl` loses no answer. rmcp's own drain
//!   gives up after 5 s and cancels the rest.
//! - **One request per id.** A request whose id is still in flight is
//!   refused (JSON-RPC requires unique ids) instead of run: both ran, and
//!   one answer was lost.
//!
//! An entry older than the longest a request may take (`stale_after`: the
//! call deadline plus a margin) is no longer counted, so a request that
//! somehow never got an answer cannot hold the bound for the server's
//! life.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, NumberOrString, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::sync::Notify;

use crate::subscriptions::MAX_SUBSCRIPTIONS;

/// A `subscriptions/listen` request: a stream that stays open by design.
pub fn is_listen(r: &rmcp::model::JsonRpcRequest<ClientRequest>) -> bool {
    matches!(r.request, ClientRequest::SubscriptionsListenRequest(_))
}

/// Requests read and not yet answered, at most (as HTTP's
/// `--max-in-flight` default).
pub const MAX_UNANSWERED: usize = 64;

/// How often a waiter looks again for entries gone stale (nothing wakes
/// it for those).
const RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Unanswered {
    ids: Mutex<HashMap<RequestId, Entry>>,
    changed: Notify,
    stale_after: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    since: Instant,
    /// Counted towards [`MAX_UNANSWERED`] (not a listen stream, not
    /// cancelled).
    counted: bool,
    /// The client cancelled it: no answer goes out for it, and its id is
    /// not taken again until it is stale.
    cancelled: bool,
}

/// Cancelled requests whose ids are kept taken, at most (the oldest is
/// let go first); each id at most [`MAX_KEPT_CANCELLED_ID`] bytes (a longer
/// one is let go at once). Kept ids are the client's bytes held until
/// stale: 100 KiB ids cancelled in a loop held 262 MB (a helper's find).
pub const MAX_KEPT_CANCELLED: usize = 1024;
/// See [`MAX_KEPT_CANCELLED`].
pub const MAX_KEPT_CANCELLED_ID: usize = 256;

/// What the transport does with a message it read.
#[derive(Debug, PartialEq)]
pub enum Admission {
    Pass,
    /// A request whose id is still in flight: refused, not run.
    Duplicate(RequestId),
    /// A request reusing the id of one the client cancelled (whose call
    /// may still be ending): refused, not run.
    ReusesCancelled(RequestId),
}

impl Unanswered {
    pub fn new(stale_after: Duration) -> Self {
        Unanswered {
            ids: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            stale_after,
        }
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Entry>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a request read from the client (or, for a cancellation, the
    /// end of the request it names: no answer follows one).
    pub fn admit(&self, message: &RxJsonRpcMessage<RoleServer>) -> Admission {
        match message {
            JsonRpcMessage::Request(r) => {
                let now = Instant::now();
                let mut ids = self.ids();
                match ids.get(&r.id) {
                    Some(e) if !self.stale(e, now) && e.cancelled => {
                        return Admission::ReusesCancelled(r.id.clone())
                    }
                    Some(e) if !self.stale(e, now) => return Admission::Duplicate(r.id.clone()),
                    _ => {}
                }
                // A listen stream stays open by design and is not counted,
                // up to as many as may be open; past that a listen request
                // counts like any other (50,000 of them, each refused at
                // once, held 1 GB unanswered; a helper's find).
                let open_listens = || ids.values().filter(|e| !e.counted && !e.cancelled).count();
                let counted = !is_listen(r) || open_listens() >= MAX_SUBSCRIPTIONS;
                ids.insert(
                    r.id.clone(),
                    Entry {
                        since: now,
                        counted,
                        cancelled: false,
                    },
                );
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        self.cancelled(id);
                    }
                }
            }
            _ => {}
        }
        Admission::Pass
    }

    /// The id `message` answers, if it is an answer.
    pub fn answer_id(message: &TxJsonRpcMessage<RoleServer>) -> Option<RequestId> {
        match message {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        }
    }

    /// The client cancelled `id`: it no longer counts towards the bound
    /// (no answer will come), but its id stays taken until it is stale. A
    /// request reusing it at once was run, and the cancelled call's result
    /// went out under its id while its own was never sent (rmcp matches
    /// cancellations and answers by id; a helper's find).
    fn cancelled(&self, id: &RequestId) {
        let mut ids = self.ids();
        let Some(e) = ids.get_mut(id) else {
            return;
        };
        e.counted = false;
        e.cancelled = true;
        let id_bytes = match id {
            NumberOrString::String(s) => s.len(),
            NumberOrString::Number(_) => 0,
        };
        if id_bytes > MAX_KEPT_CANCELLED_ID {
            ids.remove(id);
        }
        let kept = ids.values().filter(|e| e.cancelled).count();
        if kept > MAX_KEPT_CANCELLED {
            let oldest = ids
                .iter()
                .filter(|(_, e)| e.cancelled)
                .min_by_key(|(_, e)| e.since)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                ids.remove(&oldest);
            }
        }
        drop(ids);
        self.changed.notify_waiters();
    }

    /// Whether the answer to `id` is one to drop: its request was
    /// cancelled (taken off the record, so the id is free again).
    pub fn drops_answer(&self, id: &RequestId) -> bool {
        let mut ids = self.ids();
        if ids.get(id).is_some_and(|e| e.cancelled) {
            ids.remove(id);
            return true;
        }
        false
    }

    /// The request `id` was answered (its answer written).
    pub fn answered(&self, id: &RequestId) {
        if self.ids().remove(id).is_some() {
            self.changed.notify_waiters();
        }
    }

    fn stale(&self, e: &Entry, now: Instant) -> bool {
        now.duration_since(e.since) > self.stale_after
    }

    /// Requests counted towards the bound now (stale entries dropped).
    pub fn counted(&self) -> usize {
        let now = Instant::now();
        let mut ids = self.ids();
        ids.retain(|_, e| !self.stale(e, now));
        ids.values().filter(|e| e.counted).count()
    }

    /// Returns once fewer than `n` requests are counted.
    pub async fn until_fewer_than(&self, n: usize) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.counted() < n {
                return;
            }
            let _ = tokio::time::timeout(RECHECK, changed).await;
        }
    }
}

#[cfg(test)]
mod tests;
