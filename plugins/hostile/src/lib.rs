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
        t(
            "big_write",
            obj(
                json!({"bytes": {"type": "integer", "minimum": 0}}),
                &["bytes"],
            ),
            None,
        ),
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
        t("count_calls", obj(json!({}), &[]), None),
        t(
            "scribble",
            obj(
                json!({"bytes": {"type": "integer", "minimum": 0},
                       "then_peek": {"type": "boolean"}}),
                &["bytes"],
            ),
            None,
        ),
        t("peek", obj(json!({}), &[]), None),
        t(
            "hold_files",
            obj(
                json!({"count": {"type": "integer", "minimum": 0},
                       "listings": {"type": "boolean"},
                       "streams_of": {"type": "string"},
                       "drop_preopens": {"type": "boolean"},
                       "hold_ms": {"type": "integer", "minimum": 0}}),
                &["count"],
            ),
            None,
        ),
        t(
            "host_hoard",
            obj(
                json!({"kind": {"enum": ["random", "pollables"]},
                       "n": {"type": "integer", "minimum": 0}}),
                &["kind", "n"],
            ),
            None,
        ),
        t("sleep_forever", obj(json!({}), &[]), None),
        t("sleep_far", obj(json!({}), &[]), None),
        t(
            "fs_mutate",
            obj(
                json!({"op": {"enum": MUTATIONS}, "path": s(), "to": s()}),
                &["op", "path"],
            ),
            None,
        ),
        t(
            "fill",
            obj(json!({"mb": {"type": "integer", "minimum": 0}}), &["mb"]),
            None,
        ),
        t(
            "sync_loop",
            obj(
                json!({"path": s(), "n": {"type": "integer", "minimum": 0}}),
                &["path", "n"],
            ),
            None,
        ),
        t(
            "create_race",
            obj(
                json!({"mode": {"enum": ["flip", "create", "swap_fifo", "open", "open_dotdot"]},
                       "ms": {"type": "integer", "minimum": 0}}),
                &["mode", "ms"],
            ),
            None,
        ),
    ]
}

/// Every way `fs_mutate` changes the filesystem, one WASI call each.
pub const MUTATIONS: [&str; 12] = [
    "create",
    "write",
    "write_read_only_fd",
    "truncate",
    "append",
    "rename",
    "remove",
    "rmdir",
    "mkdir",
    "symlink",
    "hardlink",
    "set_times",
];

/// One change at `path` (`to`: the second path of rename, link and
/// symlink), reported as it went; the tool claims success either way so
/// the host, not the plugin, decides the outcome.
fn mutate(op: &str, path: &str, to: &str) -> std::io::Result<()> {
    use std::fs::{File, OpenOptions};
    use std::io::Write;
    match op {
        "create" => File::create_new(path).map(drop),
        "write" => OpenOptions::new().write(true).open(path)?.write_all(b"x"),
        // A descriptor opened for reading, written anyway (fd_write).
        "write_read_only_fd" => File::open(path)?.write_all(b"x"),
        "truncate" => File::open(path)?.set_len(0),
        "append" => OpenOptions::new().append(true).open(path)?.write_all(b"x"),
        "rename" => std::fs::rename(path, to),
        "remove" => std::fs::remove_file(path),
        "rmdir" => std::fs::remove_dir(path),
        "mkdir" => std::fs::create_dir(path),
        "symlink" => symlink(to, path),
        "hardlink" => std::fs::hard_link(path, to),
        "set_times" => File::open(path)?.set_modified(std::time::UNIX_EPOCH),
        _ => Err(std::io::Error::other(format!("unknown op {op}"))),
    }
}

/// `path_symlink` straight from the preview1 import (std has no stable
/// `symlink` on WASI), relative to fd 3: the first preopen, `/`.
#[cfg(target_os = "wasi")]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    extern "C" {
        fn path_symlink(
            old: *const u8,
            old_len: usize,
            fd: i32,
            new: *const u8,
            new_len: usize,
        ) -> u16;
    }
    let link = link.trim_start_matches('/');
    // SAFETY: both pointers and lengths describe live UTF-8 buffers.
    let errno =
        unsafe { path_symlink(target.as_ptr(), target.len(), 3, link.as_ptr(), link.len()) };
    match errno {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e as i32)),
    }
}

#[cfg(not(target_os = "wasi"))]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// See the `hold_files` tool: how many handles it got, and the error that
/// stopped it. `drop_preopens`: after each, the handles `get-directories`
/// hands out (new ones each time, of the same preopened directory) are
/// dropped, which must give back nothing.
#[cfg(target_arch = "wasm32")]
fn hold_files(
    count: u64,
    listings: bool,
    streams_of: Option<&str>,
    hold_ms: u64,
    drop_preopens: bool,
) -> (usize, Option<String>) {
    use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let Some((root, _)) = wasip2::filesystem::preopens::get_directories()
        .into_iter()
        .next()
    else {
        return (0, Some("no preopened directory".into()));
    };
    let (mut files, mut streams, mut error) = (Vec::new(), Vec::new(), None);
    if let Some(path) = streams_of {
        return match path.strip_prefix("write:") {
            Some(path) => hold_write_streams(&root, path, count, hold_ms),
            None => hold_read_streams(&root, path, count, hold_ms),
        };
    }
    for _ in 0..count {
        let held = if listings {
            root.read_directory().map(|s| streams.push(s))
        } else {
            root.open_at(
                PathFlags::empty(),
                ".",
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map(|d| files.push(d))
        };
        if let Err(e) = held {
            error = Some(format!("{e:?}"));
            break;
        }
        if drop_preopens {
            drop(wasip2::filesystem::preopens::get_directories());
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(hold_ms));
    (files.len() + streams.len(), error)
}

/// `count` times: `path` opened for writing (created), a write stream of
/// it (an append stream every other time) kept, the descriptor dropped.
/// The streams hold the file open.
#[cfg(target_arch = "wasm32")]
fn hold_write_streams(
    root: &wasip2::filesystem::types::Descriptor,
    path: &str,
    count: u64,
    hold_ms: u64,
) -> (usize, Option<String>) {
    use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let (mut streams, mut error) = (Vec::new(), None);
    for i in 0..count {
        let opened = root.open_at(
            PathFlags::empty(),
            path,
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        );
        let stream = opened.and_then(|file| match i % 2 {
            0 => file.write_via_stream(0),
            _ => file.append_via_stream(),
        });
        match stream {
            Ok(s) => streams.push(s),
            Err(e) => {
                error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(hold_ms));
    (streams.len(), error)
}

/// One file opened, then `count` read streams of it, each with a read of
/// 64 KiB started (a buffer on the host until the guest takes it), all kept.
#[cfg(target_arch = "wasm32")]
fn hold_read_streams(
    root: &wasip2::filesystem::types::Descriptor,
    path: &str,
    count: u64,
    hold_ms: u64,
) -> (usize, Option<String>) {
    use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let file = match root.open_at(
        PathFlags::empty(),
        path,
        OpenFlags::empty(),
        DescriptorFlags::READ,
    ) {
        Ok(f) => f,
        Err(e) => return (0, Some(format!("{e:?}"))),
    };
    let (mut streams, mut error) = (Vec::new(), None);
    for _ in 0..count {
        match file.read_via_stream(0) {
            Ok(s) => {
                let _ = s.read(65536);
                streams.push(s);
            }
            Err(e) => {
                error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(hold_ms));
    (streams.len(), error)
}

/// See the `create_race` tool. `flip`: renames `f` to `x` and back, 1 ms
/// apart. `create`: opens `f` with create; when that made a new, empty `f`
/// (still the one at `f`), moves it to `keep/N`. Run together, an open
/// that a check before it took for "exists" may create. How many it kept.
/// `swap_fifo`: the file `f` and the FIFO `p` trade places and back, over
/// and over. `open`: opens `f` for reading, over and over (how many
/// opened); `open_dotdot` the same by `d/../d/../…/f`, whose resolution a
/// rename anywhere makes fail `EAGAIN`. Run together, an open that the
/// check before it took for a file may find the FIFO.
#[cfg(target_arch = "wasm32")]
fn create_race(mode: &str, ms: u64) -> u64 {
    use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let Some((root, _)) = wasip2::filesystem::preopens::get_directories()
        .into_iter()
        .next()
    else {
        return 0;
    };
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let pause = std::time::Duration::from_millis(1);
    let mut kept = 0;
    while std::time::Instant::now() < end {
        if mode == "swap_fifo" {
            let _ = root.rename_at("f", &root, "t");
            let _ = root.rename_at("p", &root, "f");
            let _ = root.rename_at("f", &root, "p");
            let _ = root.rename_at("t", &root, "f");
            continue;
        }
        if mode == "open" || mode == "open_dotdot" {
            let path = match mode {
                "open" => "f".to_string(),
                _ => format!("{}f", "d/../".repeat(800)),
            };
            let read = DescriptorFlags::READ;
            let opened = root.open_at(PathFlags::empty(), &path, OpenFlags::empty(), read);
            kept += u64::from(opened.is_ok());
            continue;
        }
        if mode == "flip" {
            if root.rename_at("f", &root, "x").is_ok() {
                std::thread::sleep(pause);
                let _ = root.rename_at("x", &root, "f");
            }
            std::thread::sleep(pause);
            continue;
        }
        let flags = DescriptorFlags::READ | DescriptorFlags::WRITE;
        let Ok(fd) = root.open_at(PathFlags::empty(), "f", OpenFlags::CREATE, flags) else {
            continue;
        };
        let same = match (
            fd.metadata_hash(),
            root.metadata_hash_at(PathFlags::empty(), "f"),
        ) {
            (Ok(a), Ok(b)) => (a.lower, a.upper) == (b.lower, b.upper),
            _ => false,
        };
        if same && fd.stat().is_ok_and(|s| s.size == 0) {
            drop(fd);
            if root.rename_at("f", &root, &format!("keep/{kept}")).is_ok() {
                kept += 1;
            }
        }
    }
    kept
}

/// See the `host_hoard` tool: `random`, one `get-random-bytes` of `n`
/// bytes (allocated on the host, then copied in); `pollables`, `n` clock
/// subscriptions kept (host memory each, none in the guest). How many.
#[cfg(target_arch = "wasm32")]
fn host_hoard(kind: &str, n: u64) -> u64 {
    if kind == "random" {
        return wasip2::random::random::get_random_bytes(n).len() as u64;
    }
    let held: Vec<_> = (0..n)
        .map(|_| wasip2::clocks::monotonic_clock::subscribe_duration(1 << 40))
        .collect();
    held.len() as u64
}

/// What `scribble` writes (not valid UTF-8 alone, so in no JSON text).
const MARK_BYTE: u8 = 0xA5;

/// Reads every byte of this instance's linear memory (volatile: memory
/// Rust did not allocate), then grows it by 4 MiB and reads that.
#[cfg(target_arch = "wasm32")]
fn peek() -> (u64, u64) {
    use core::arch::wasm32::{memory_grow, memory_size};
    const PAGE: usize = 65536;
    let read = |from: usize, to: usize, f: &mut dyn FnMut(u8)| {
        for addr in from.max(1)..to {
            // SAFETY: inside the linear memory (below its size in pages);
            // address 0 is skipped.
            f(unsafe { core::ptr::read_volatile(addr as *const u8) });
        }
    };
    let end = memory_size(0) * PAGE;
    let mut marked = 0u64;
    read(0, end, &mut |b| marked += u64::from(b == MARK_BYTE));
    let grown_from = memory_grow(0, 64);
    if grown_from == usize::MAX {
        return (marked, u64::MAX);
    }
    let mut dirty = 0u64;
    read(grown_from * PAGE, (grown_from + 64) * PAGE, &mut |b| {
        dirty += u64::from(b != 0)
    });
    (marked, dirty)
}

#[cfg(not(target_arch = "wasm32"))]
fn peek() -> (u64, u64) {
    (0, 0)
}

#[cfg(not(target_arch = "wasm32"))]
fn host_hoard(_: &str, _: u64) -> u64 {
    0
}

#[cfg(not(target_arch = "wasm32"))]
fn create_race(_: &str, _: u64) -> u64 {
    0
}

#[cfg(not(target_arch = "wasm32"))]
fn hold_files(_: u64, _: bool, _: Option<&str>, _: u64, _: bool) -> (usize, Option<String>) {
    (0, Some("only in wasm".into()))
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
        // One WASI 0.2 `output-stream.write` of `bytes` (the Rust std and
        // the preview1 adapter write in chunks; this hands the host the
        // whole list in one call).
        "big_write" => {
            let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
            let buf = vec![b'w'; n];
            let wrote = wasip2::cli::stdout::get_stdout().write(&buf);
            json!({"wrote": wrote.is_ok()})
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
        // How many calls this instance has served (1 in a fresh one).
        "count_calls" => {
            use std::sync::atomic::{AtomicU32, Ordering};
            static CALLS: AtomicU32 = AtomicU32::new(0);
            json!({"calls": CALLS.fetch_add(1, Ordering::Relaxed) + 1})
        }
        // Fills `bytes` of fresh heap with MARK_BYTE and leaves it there;
        // with `then_peek`, also what `peek` sees of it (the test's check
        // that `peek` finds marks where there are some).
        "scribble" => {
            let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
            let filled = std::hint::black_box(vec![MARK_BYTE; n]);
            let marked = filled.iter().filter(|b| **b == MARK_BYTE).count();
            std::mem::forget(filled);
            let then_peek = args.get("then_peek").and_then(Value::as_bool) == Some(true);
            let seen = then_peek.then(|| peek().0);
            json!({"marked": marked, "peek_marked": seen})
        }
        // What this instance can read of an earlier call's memory: the
        // MARK_BYTEs anywhere in its linear memory, and the bytes that are
        // not zero in 4 MiB it grows it by.
        "peek" => {
            let (marked, dirty_grown) = peek();
            json!({"marked": marked, "dirty_grown": dirty_grown})
        }
        // Opens the worktree's root `count` times (or lists it, with
        // `listings`, or opens read streams of the file `streams_of`, each
        // with a read started) straight through `wasi:filesystem`, not the
        // preview1 adapter with its own small descriptor table, keeps every
        // handle, then sleeps `hold_ms` holding them.
        "hold_files" => {
            let count = args.get("count").and_then(Value::as_u64).unwrap_or(0);
            let listings = args.get("listings").and_then(Value::as_bool) == Some(true);
            let hold = args.get("hold_ms").and_then(Value::as_u64).unwrap_or(0);
            let streams_of = args.get("streams_of").and_then(Value::as_str);
            let drop_preopens = args.get("drop_preopens").and_then(Value::as_bool) == Some(true);
            let (opened, error) = hold_files(count, listings, streams_of, hold, drop_preopens);
            json!({"opened": opened, "error": error})
        }
        "host_hoard" => {
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(0);
            json!({"got": host_hoard(&arg("kind"), n)})
        }
        "sleep_forever" => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        // One poll on a subscription as far off as the clock goes.
        "sleep_far" => loop {
            std::thread::sleep(std::time::Duration::from_nanos(u64::MAX));
        },
        "create_race" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            json!({"kept": create_race(&arg("mode"), ms)})
        }
        "fill" => {
            // One `memory.fill` over `mb` fresh MiB, first thing: no epoch
            // check interrupts a single instruction.
            let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(0) as usize;
            let filled = std::hint::black_box(vec![1u8; mb << 20]);
            json!({"filled": filled.len()})
        }
        "sync_loop" => {
            // fsync and fdatasync of the file `path`, `n` times each (open
            // for writing: preview1 gives a read-only descriptor no right
            // to sync).
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(0);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(arg("path"))
                .map_err(io)?;
            for _ in 0..n {
                f.sync_all().map_err(io)?;
                f.sync_data().map_err(io)?;
            }
            json!({"synced": n})
        }
        "fs_mutate" => {
            let result = mutate(&arg("op"), &arg("path"), &arg("to"));
            json!({"op": arg("op"), "error": result.err().map(|e| e.to_string())})
        }
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
        assert_eq!(super::tools().len(), 25);
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
