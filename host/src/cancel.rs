//! Cancellation of a request by the client (`notifications/cancelled`, on
//! both protocol revisions): the request's future is dropped at once, and
//! with it the call's store, instance and slots. A guest running wasm code
//! yields to the executor at every epoch tick, so it stops within one tick.

use std::future::Future;
use std::time::Instant;

use crate::stdio_reader::SHOWN_ID_CHARS;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// Runs `work` until it ends, or until the client cancels the request:
/// then `work` is dropped (that stops the guest and frees its slots), the
/// cancellation is logged, and the result is `None`. rmcp sends no
/// response for a cancelled request.
pub async fn unless_cancelled<T>(
    context: &RequestContext<RoleServer>,
    tool: &str,
    work: impl Future<Output = T>,
) -> Option<T> {
    let arrived = Instant::now();
    // Boxed so that it can be dropped (ending the call) before we log.
    let mut work = Box::pin(work);
    tokio::select! {
        // A request cancelled before its call began never starts it (half
        // of 20,000 calls cancelled at once ran one epoch slice each,
        // minutes of CPU in all; a helper's find).
        biased;
        () = context.ct.cancelled() => {
            let noticed = Instant::now();
            drop(work);
            let shown = context.id.to_string();
            let request = wasm_mcp_protocol::text::head_chars(&shown, SHOWN_ID_CHARS);
            tracing::info!(
                tool,
                request,
                ran_ms = arrived.elapsed().as_millis() as u64,
                stop_us = noticed.elapsed().as_micros() as u64,
                "call cancelled by the client: guest stopped, slots released"
            );
            None
        }
        out = &mut work => Some(out),
    }
}
