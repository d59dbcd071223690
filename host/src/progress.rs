//! Progress of a `tools/call`, for clients that put a `progressToken` in
//! the request's `_meta`: what the server actually knows, in order
//! (queued for a slot — only when the call had to wait for one —, running),
//! as `notifications/progress` on the request's own stream; the response is
//! the last step. No notification is sent for the end: the TypeScript SDK
//! runs notification handlers a turn after responses, so an end reported
//! just before the response (both in one read) reached it after its request
//! was answered, and it reported an unknown progress token to the
//! application (a helper's find).
//!
//! A call that ends within [`Progress`]'s `after` (default
//! [`DEFAULT_PROGRESS_AFTER`]) is answered with no progress at all: each
//! notification is a frame the client must read, and rmcp's client puts a
//! token on every request, so a small call paid ~60 µs for a "running" and
//! a "done" nobody could see (the bench's sequential section). A call that
//! waits for a slot is reported at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::ErrorData as McpError;
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::registry::CallStage;

/// Steps of a call: queued, running, and its response (not a notification).
const TOTAL: f64 = 3.0;

/// Longest `progressToken` a request may carry. Every notification of
/// its progress repeats the token, and rmcp's session worker writes each
/// inline: 40 calls sharing one 1 MiB token, their streams unread, filled
/// its queue, and the worker stopped for every request of the session (a
/// helper's find). Request ids have the same bound where they are kept.
pub const MAX_PROGRESS_TOKEN_BYTES: usize = 256;

/// How long a call runs unreported (`wasm-mcp serve --progress-after-ms`).
pub const DEFAULT_PROGRESS_AFTER: Duration = Duration::from_millis(100);

/// Sends the progress of one request (only built when it has a token).
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    tool: String,
    /// How long a running call goes unreported.
    after: Duration,
    /// Something was sent (a call that waited is reported running at once).
    reported: AtomicBool,
}

impl Progress {
    /// A reporter when the request asked for progress, else `None`; a
    /// refusal when its token is longer than [`MAX_PROGRESS_TOKEN_BYTES`].
    pub fn for_request(
        context: &RequestContext<RoleServer>,
        tool: &str,
        after: Duration,
    ) -> Result<Option<Self>, McpError> {
        let Some(token) = context.meta.get_progress_token() else {
            return Ok(None);
        };
        if let NumberOrString::String(s) = &token.0 {
            if s.len() > MAX_PROGRESS_TOKEN_BYTES {
                return Err(McpError::invalid_params(
                    format!(
                        "_meta.progressToken is {} bytes; at most {MAX_PROGRESS_TOKEN_BYTES} are taken (every progress notification repeats it)",
                        s.len()
                    ),
                    None,
                ));
            }
        }
        Ok(Some(Progress {
            peer: context.peer.clone(),
            token,
            tool: tool.to_owned(),
            after,
            reported: AtomicBool::new(false),
        }))
    }

    /// Reports each stage the call passes until the call drops its sender;
    /// a start only once the call has run for `after` (or had to wait).
    pub async fn forward(&self, mut stages: UnboundedReceiver<CallStage>) {
        while let Some(stage) = stages.recv().await {
            match stage {
                CallStage::Queued => {
                    self.send(1.0, format!("{}: waiting for a call slot", self.tool))
                        .await
                }
                CallStage::Running => {
                    if !self.reported() && !self.after.is_zero() {
                        tokio::select! {
                            biased;
                            // The call ended (its sender dropped) in time.
                            None = stages.recv() => return,
                            () = tokio::time::sleep(self.after) => {}
                        }
                    }
                    self.send(2.0, format!("{}: running", self.tool)).await
                }
            }
        }
    }

    fn reported(&self) -> bool {
        self.reported.load(Ordering::Acquire)
    }

    async fn send(&self, step: f64, message: String) {
        self.reported.store(true, Ordering::Release);
        let mut param = ProgressNotificationParam::new(self.token.clone(), step).with_total(TOTAL);
        param.message = Some(message);
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!("progress not delivered: {e}");
        }
    }
}
