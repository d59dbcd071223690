//! TEST-ONLY plugin whose `list-tools` first hands the host [`WRITE_BYTES`]
//! in one WASI call (a single `output-stream.write` to stdout), then lists
//! one tool. The host lifts a WASI call's arguments under the same
//! hostcall fuel as the tool list, so the load must be refused at the
//! tool-list limit (48 MiB) before the host copies the buffer.

use serde_json::json;
use wasm_mcp_guest::Tool;

/// Bytes of the one write made while listing.
pub const WRITE_BYTES: usize = 64 << 20;

/// The write, then the one tool (on the guest SDK; `export_tools!` runs
/// this for `list-tools`).
pub fn tools() -> Vec<Tool> {
    #[cfg(target_arch = "wasm32")]
    {
        let buf = vec![b'w'; WRITE_BYTES];
        let _ = wasip2::cli::stdout::get_stdout().write(&buf);
    }
    vec![Tool::raw("quiet", json!({"type": "object"}), |_| {
        Ok("{}".into())
    })]
}

wasm_mcp_guest::export_tools!(tools());
