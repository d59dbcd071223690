//! TEST-ONLY tool plugin for the sandbox escape suite. Every tool does the
//! raw, unchecked thing (no path normalization, no limits) so the tests can
//! prove the *host* contains it. Never install it in the default plugin dir.

use serde_json::{json, Value};

pub struct Tool {
    pub name: &'static str,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn s() -> Value {
    json!({"type": "string"})
}

pub fn tools() -> Vec<Tool> {
    let t = |name, input_schema, output_schema| Tool {
        name,
        input_schema,
        output_schema,
    };
    vec![
        t("fs_read", obj(json!({"path": s()}), &["path"]), None),
        t(
            "fs_write",
            obj(json!({"path": s(), "content": s()}), &["path", "content"]),
            None,
        ),
        t("fs_list", obj(json!({"path": s()}), &["path"]), None),
        t("env", obj(json!({}), &[]), None),
        t("spin", obj(json!({}), &[]), None),
        t("alloc_bomb", obj(json!({}), &[]), None),
        t(
            "flood",
            obj(
                json!({"bytes": {"type": "integer", "minimum": 0}}),
                &["bytes"],
            ),
            None,
        ),
        t("stdout_spam", obj(json!({}), &[]), None),
        t("net", obj(json!({}), &[]), None),
        t(
            "bad_output",
            obj(json!({}), &[]),
            Some(obj(json!({"n": {"type": "integer"}}), &["n"])),
        ),
        t("panic", obj(json!({}), &[]), None),
        t("clock", obj(json!({}), &[]), None),
        t(
            "append_then_spin",
            obj(json!({"path": s(), "line": s()}), &["path", "line"]),
            None,
        ),
        t("sleep_forever", obj(json!({}), &[]), None),
        t("sleep_far", obj(json!({}), &[]), None),
    ]
}

/// Error: (is_unknown_tool, message). Everything else is reported as io.
pub fn call(name: &str, args_json: &str) -> Result<Value, (bool, String)> {
    let args: Value = serde_json::from_str(args_json).unwrap_or(json!({}));
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let io = |e: std::io::Error| (false, e.to_string());
    Ok(match name {
        "fs_read" => json!({"content": std::fs::read_to_string(arg("path")).map_err(io)?}),
        "fs_write" => {
            std::fs::write(arg("path"), arg("content")).map_err(io)?;
            json!({"ok": true})
        }
        "fs_list" => {
            let mut names = Vec::new();
            for e in std::fs::read_dir(arg("path")).map_err(io)? {
                names.push(e.map_err(io)?.file_name().to_string_lossy().into_owned());
            }
            json!({"entries": names})
        }
        "env" => json!({
            "vars": std::env::vars().collect::<std::collections::BTreeMap<_, _>>(),
            "args": std::env::args().collect::<Vec<_>>(),
            "cwd": std::env::current_dir().ok().map(|p| p.display().to_string()),
        }),
        "spin" => {
            let mut i: u64 = 0;
            loop {
                i = std::hint::black_box(i.wrapping_add(1));
            }
        }
        "alloc_bomb" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut chunk = vec![0u8; 16 << 20];
                for b in chunk.iter_mut().step_by(4096) {
                    *b = 1;
                }
                hoard.push(std::hint::black_box(chunk));
            }
        }
        "flood" => {
            let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
            json!({"data": "x".repeat(n)})
        }
        "stdout_spam" => {
            let line = "y".repeat(1023);
            for _ in 0..1024 {
                println!("{line}");
                eprintln!("{line}");
            }
            json!({"ok": true})
        }
        "net" => match std::net::TcpStream::connect("127.0.0.1:9") {
            Ok(_) => json!({"error": null, "connected": true}),
            Err(e) => json!({"error": e.to_string()}),
        },
        "bad_output" => json!({"n": "not a number"}),
        "panic" => panic!("hostile plugin panicked on purpose"),
        "clock" => {
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let start = std::time::Instant::now();
            let mut x: u64 = 0;
            for i in 0..2_000_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            json!({"wall_secs": wall.as_secs(), "wall_nanos": wall.subsec_nanos(), "mono_elapsed_ns": start.elapsed().as_nanos() as u64})
        }
        // A non-idempotent side effect followed by a hang: the fault tests
        // kill the server here and check the write is never repeated.
        "append_then_spin" => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(arg("path"))
                .map_err(io)?;
            writeln!(f, "{}", arg("line")).map_err(io)?;
            drop(f);
            let mut i: u64 = 0;
            loop {
                i = std::hint::black_box(i.wrapping_add(1));
            }
        }
        // Blocked in a host call (a WASI poll on a monotonic-clock
        // subscription), where epoch interruption never fires.
        "sleep_forever" => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        // One poll on a subscription as far off as the clock goes.
        "sleep_far" => loop {
            std::thread::sleep(std::time::Duration::from_nanos(u64::MAX));
        },
        _ => return Err((true, format!("unknown tool `{name}`"))),
    })
}

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::tools()
                .into_iter()
                .map(|t| ToolDescriptor {
                    name: t.name.into(),
                    title: None,
                    description: format!("TEST ONLY: hostile `{}`", t.name),
                    input_schema: t.input_schema.to_string(),
                    output_schema: t.output_schema.map(|s| s.to_string()),
                    annotations: Annotations {
                        read_only: false,
                        destructive: true,
                        idempotent: false,
                        open_world: true,
                    },
                })
                .collect()
        }

        fn call(name: String, args_json: String) -> Result<String, ToolError> {
            crate::call(&name, &args_json)
                .map(|v| v.to_string())
                .map_err(|(unknown, message)| ToolError {
                    code: if unknown {
                        ErrorCode::UnknownTool
                    } else {
                        ErrorCode::Io
                    },
                    message,
                })
        }
    }

    export!(Plugin);
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_and_dispatches() {
        assert_eq!(super::tools().len(), 15);
        assert_eq!(
            super::call("bad_output", "{}").unwrap()["n"],
            "not a number"
        );
        assert_eq!(
            super::call("flood", r#"{"bytes": 5}"#).unwrap()["data"],
            "xxxxx"
        );
        assert!(super::call("nope", "{}").unwrap_err().0);
    }
}
