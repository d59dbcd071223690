//! TEST-ONLY plugin whose `list-tools` hands the host 100 MiB: 200 tools,
//! each with a 512 KiB description. Under wasmtime's default hostcall fuel
//! (128 MiB) the host would copy all of it before the catalog cut the
//! descriptions; the host must stop at its tool-list limit and refuse it.

use std::sync::OnceLock;

use serde_json::json;
use wasm_mcp_guest::Tool;

/// Tools declared.
pub const TOOLS: usize = 200;

/// Bytes of each tool's description.
pub const DESCRIPTION_BYTES: usize = 512 << 10;

/// The one description every tool shares (copied into each descriptor).
fn description() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| "d".repeat(DESCRIPTION_BYTES))
}

/// The tools on the guest SDK ([`Tool::raw`]: names made at run time).
pub fn tools() -> Vec<Tool> {
    (0..TOOLS)
        .map(|i| {
            Tool::raw(format!("huge_{i}"), json!({"type": "object"}), |_| {
                Ok("{}".into())
            })
            .description(description())
            .read_only()
            .idempotent()
        })
        .collect()
}

wasm_mcp_guest::export_tools!(tools());

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_is_100_mib() {
        let all = wasm_mcp_guest::descriptors(&super::tools());
        let bytes: usize = all.iter().map(|d| d.description.len()).sum();
        assert_eq!((all.len(), bytes), (200, 100 << 20));
    }
}
