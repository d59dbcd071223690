//! Human-readable progress, rendered from trace events as they are recorded:
//! each round, each tool call (local and remote name, shortened arguments,
//! state, duration, a one-line result), errors, and the end of the run.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::run::trace::TraceObserver;

/// Max characters of arguments / results on a progress line.
const ARGS_CHARS: usize = 120;
const RESULT_CHARS: usize = 160;

/// `s` on one line, at most `max` characters (`…` marks a cut).
pub fn shorten(s: &str, max: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        return one;
    }
    let mut cut: String = one.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `s` safe to print on a terminal: control characters (escape sequences,
/// carriage returns, newlines) and bidirectional overrides, which a tool or
/// server could use to redraw or disguise what the user reads, are shown
/// as `\u{..}` instead of acting.
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `server.remote (local)` for a trace event with `tool` and `origin`.
fn tool_label(ev: &Value) -> String {
    let local = text(&ev["tool"]);
    match (
        ev["origin"]["server_id"].as_str(),
        ev["origin"]["remote_name"].as_str(),
    ) {
        (Some(s), Some(r)) => format!("{s}.{r} ({local})"),
        _ => local,
    }
}

fn duration(ms: &Value) -> String {
    match ms.as_u64() {
        Some(ms) if ms >= 1000 => format!("{:.1} s", ms as f64 / 1000.0),
        Some(ms) => format!("{ms} ms"),
        None => "?".into(),
    }
}

/// The progress line for one trace event, if it deserves one.
pub fn render(ev: &Value) -> Option<String> {
    let kind = ev["kind"].as_str()?;
    Some(match kind {
        "task_start" => format!(
            "run {}: task `{}` with {} provider, worktree {} (branch {})",
            text(&ev["run_id"]),
            text(&ev["task"]),
            text(&ev["provider"]),
            text(&ev["worktree"]),
            text(&ev["branch"])
        ),
        "server_connected" => format!(
            "server {} connected (protocol {})",
            text(&ev["server"]),
            text(&ev["facts"]["protocol_version"])
        ),
        "server_connect_failed" => format!(
            "! server {} failed to connect: {}",
            text(&ev["server"]),
            text(&ev["error"])
        ),
        "tool_skipped" => format!(
            "  skipped tool {}.{}: {}",
            text(&ev["server"]),
            text(&ev["tool"]),
            text(&ev["reason"])
        ),
        "server_lost" => format!("! server {} lost", text(&ev["server"])),
        "server_reconnected" => format!("server {} reconnected", text(&ev["server"])),
        "round_start" => format!(
            "round {} (catalog v{}, {} tools)",
            ev["round"], ev["catalog_version"], ev["tools"]
        ),
        "tool_call_start" => format!(
            "  → {} {}",
            tool_label(ev),
            shorten(&text(&ev["arguments"]), ARGS_CHARS)
        ),
        "tool_call" => {
            let state = text(&ev["state"]);
            let mark = if ev["error"].is_null() { "←" } else { "✗" };
            let err = match ev["error"].as_str() {
                Some(e) => format!(" [{e}]"),
                None => String::new(),
            };
            format!(
                "  {mark} {} {state}{err} in {}: {}",
                tool_label(ev),
                duration(&ev["duration_ms"]),
                shorten(&text(&ev["result"]), RESULT_CHARS)
            )
        }
        "call_cancelled" => format!("  ! cancelled calls in flight: {}", text(&ev["reason"])),
        "contract_violation" => format!(
            "  ! {} broke its output contract: {}",
            tool_label(ev),
            shorten(&text(&ev["violation"]), RESULT_CHARS)
        ),
        "provider_error" => format!("! model provider: {}", text(&ev["error"])),
        "interrupted" => "! interrupted: stopping (Ctrl-C again to exit at once)".into(),
        "final" => format!("final answer: {}", shorten(&text(&ev["message"]), 400)),
        "task_end" => match ev["error"].as_str() {
            Some(e) => format!("! run failed: {e}"),
            None => "run finished".into(),
        },
        _ => return None,
    })
}

/// An observer that writes [`render`]ed lines to `out` (stderr in the binary).
pub fn printer(out: Box<dyn Write + Send>) -> TraceObserver {
    let out = Mutex::new(out);
    Arc::new(move |ev: &Value| {
        if let Some(line) = render(ev) {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(o, "{}", terminal_safe(&line));
            let _ = o.flush();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_show_names_state_duration_and_one_line_result() {
        let origin = json!({"server_id": "ws", "remote_name": "read_file"});
        let start = render(
            &json!({"kind": "tool_call_start", "tool": "mcp_ws_read_file_1",
            "origin": origin, "arguments": format!("{{\"path\": \"{}\"}}", "a".repeat(500))}),
        )
        .unwrap();
        assert!(
            start.starts_with("  → ws.read_file (mcp_ws_read_file_1) {\"path\""),
            "{start}"
        );
        assert!(
            start.ends_with('…') && start.chars().count() < 200,
            "{start}"
        );
        let done = render(&json!({"kind": "tool_call", "tool": "mcp_ws_read_file_1", "origin": origin,
            "state": "completed", "error": null, "duration_ms": 1500, "result": "line one\nline two"}))
        .unwrap();
        assert_eq!(
            done,
            "  ← ws.read_file (mcp_ws_read_file_1) completed in 1.5 s: line one line two"
        );
        let failed = render(&json!({"kind": "tool_call", "tool": "t", "origin": null,
            "state": "unknown", "error": "fault", "duration_ms": 12, "result": "error: timed out"}))
        .unwrap();
        assert_eq!(failed, "  ✗ t unknown [fault] in 12 ms: error: timed out");
        assert_eq!(render(&json!({"kind": "catalog"})), None);
        let skipped = render(&json!({"kind": "tool_skipped", "server": "ws", "tool": "t",
            "reason": "duplicate tool name (not exposed by policy)"}))
        .unwrap();
        assert_eq!(
            skipped,
            "  skipped tool ws.t: duplicate tool name (not exposed by policy)"
        );
        assert!(render(
            &json!({"kind": "round_start", "round": 2, "catalog_version": 1, "tools": 4})
        )
        .unwrap()
        .starts_with("round 2"));
    }

    #[test]
    fn nothing_a_server_sends_acts_on_the_terminal() {
        let out = std::sync::Arc::new(Mutex::new(Vec::<u8>::new()));
        struct W(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let print = printer(Box::new(W(out.clone())));
        let evil = "\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}\rwork committed\nfake\u{202e}txt";
        print(&json!({"kind": "tool_skipped", "server": "ws", "tool": evil, "reason": evil}));
        print(&json!({"kind": "server_connect_failed", "server": "ws", "error": evil}));
        print(&json!({"kind": "task_end", "error": evil}));
        let shown = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert_eq!(shown.lines().count(), 3, "{shown}");
        assert!(
            !shown
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\u{1b}[2J"), "{shown}");
        assert_eq!(terminal_safe("plain €"), "plain €");
    }

    #[test]
    fn shorten_counts_characters_not_bytes() {
        assert_eq!(shorten("€€€€", 3), "€€…");
        assert_eq!(shorten("a\r\nb", 10), "a b");
    }
}
