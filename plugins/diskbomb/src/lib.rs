//! TEST-ONLY tool plugin for the disk suite: every tool tries to fill the
//! worktree (huge files, sparse files, file and directory storms) and stops
//! at the first error, reporting how far it got. The host's disk budget
//! must stop each one. Never install it in the default plugin dir.

use std::io::{Seek, SeekFrom, Write};

use serde_json::{json, Value};

pub struct Tool {
    pub name: &'static str,
    pub input_schema: Value,
}

fn obj(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

pub fn tools() -> Vec<Tool> {
    let t = |name, input_schema| Tool { name, input_schema };
    let int = json!({"type": "integer", "minimum": 0});
    let s = json!({"type": "string"});
    vec![
        t(
            "big_file",
            obj(json!({"path": s, "chunk": int, "max": int})),
        ),
        t("many_files", obj(json!({"dir": s, "count": int}))),
        t("mkdir_storm", obj(json!({"dir": s, "count": int}))),
        t("sparse_set_len", obj(json!({"path": s, "size": int}))),
        t("sparse_seek", obj(json!({"path": s, "offset": int}))),
        t("sparse_pwrite", obj(json!({"path": s, "offset": int}))),
        t(
            "append_bomb",
            obj(json!({"path": s, "chunk": int, "max": int})),
        ),
        t("write_small", obj(json!({"path": s, "bytes": int}))),
        t("link_storm", obj(json!({"dir": s, "count": int}))),
    ]
}

type Failure = (bool, String);

struct Args(Value);

impl Args {
    fn str(&self, k: &str, default: &str) -> String {
        self.0
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    }
    fn u64(&self, k: &str, default: u64) -> u64 {
        self.0.get(k).and_then(Value::as_u64).unwrap_or(default)
    }
}

/// The first error of a loop, with how far it got.
fn stopped(what: &str, done: u64, e: std::io::Error) -> Failure {
    (false, format!("{what} stopped after {done}: {e}"))
}

/// Writes `chunk`-byte blocks until `max` bytes or the first error.
fn fill(mut f: std::fs::File, chunk: u64, max: u64) -> Result<Value, Failure> {
    let block = vec![b'x'; chunk.max(1) as usize];
    let mut written = 0u64;
    while written < max {
        f.write_all(&block)
            .map_err(|e| stopped("write", written, e))?;
        written += block.len() as u64;
    }
    Ok(json!({"written": written}))
}

fn create(path: &str) -> Result<std::fs::File, Failure> {
    std::fs::File::create(path).map_err(|e| (false, format!("create {path}: {e}")))
}

/// `fd_pwrite` straight from the preview1 import (std has no stable
/// `write_at` on WASI).
#[cfg(target_os = "wasi")]
fn pwrite(f: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Ciovec {
        buf: *const u8,
        len: usize,
    }
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    extern "C" {
        fn fd_pwrite(
            fd: i32,
            iovs: *const Ciovec,
            n: usize,
            offset: u64,
            written: *mut usize,
        ) -> u16;
    }
    let iov = Ciovec {
        buf: buf.as_ptr(),
        len: buf.len(),
    };
    let mut written = 0usize;
    // SAFETY: one valid iovec over `buf`, `written` is a valid out pointer.
    let errno = unsafe { fd_pwrite(f.as_raw_fd(), &iov, 1, offset, &mut written) };
    match errno {
        0 => Ok(written),
        e => Err(std::io::Error::from_raw_os_error(e as i32)),
    }
}

/// `path_symlink` straight from the preview1 import (std has no stable
/// `symlink` on WASI). `dir` is the preopened worktree (fd 3).
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

#[cfg(not(target_os = "wasi"))]
fn pwrite(f: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(f, buf, offset)
}

/// Error: (is_unknown_tool, message).
pub fn call(name: &str, args_json: &str) -> Result<Value, Failure> {
    let a = Args(serde_json::from_str(args_json).unwrap_or(json!({})));
    let path = a.str("path", "bomb.bin");
    let dir = a.str("dir", "bombs");
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| (false, format!("{what}: {e}"))
    };
    Ok(match name {
        "big_file" => fill(
            create(&path)?,
            a.u64("chunk", 1 << 20),
            a.u64("max", 4 << 30),
        )?,
        "append_bomb" => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io("open"))?;
            fill(f, a.u64("chunk", 1 << 20), a.u64("max", 4 << 30))?
        }
        "many_files" => {
            std::fs::create_dir_all(&dir).map_err(io("mkdir"))?;
            let count = a.u64("count", 100_000);
            for i in 0..count {
                std::fs::write(format!("{dir}/f{i}"), b"x").map_err(|e| stopped("create", i, e))?;
            }
            json!({"created": count})
        }
        "mkdir_storm" => {
            std::fs::create_dir_all(&dir).map_err(io("mkdir"))?;
            let count = a.u64("count", 100_000);
            for i in 0..count {
                std::fs::create_dir(format!("{dir}/d{i}")).map_err(|e| stopped("mkdir", i, e))?;
            }
            json!({"created": count})
        }
        "sparse_set_len" => {
            let size = a.u64("size", 1 << 40);
            create(&path)?.set_len(size).map_err(io("set_len"))?;
            json!({"size": size})
        }
        "sparse_seek" => {
            let offset = a.u64("offset", 1 << 40);
            let mut f = create(&path)?;
            f.seek(SeekFrom::Start(offset)).map_err(io("seek"))?;
            f.write_all(b"x").map_err(io("write"))?;
            json!({"end": offset + 1})
        }
        "sparse_pwrite" => {
            let offset = a.u64("offset", 1 << 40);
            let f = create(&path)?;
            pwrite(&f, b"x", offset).map_err(io("pwrite"))?;
            json!({"end": offset + 1})
        }
        // Alternating hard links and symlinks with long targets.
        "link_storm" => {
            std::fs::create_dir_all(&dir).map_err(io("mkdir"))?;
            std::fs::write(format!("{dir}/base"), b"x").map_err(io("base"))?;
            let target = "t".repeat(1000);
            let count = a.u64("count", 100_000);
            for i in 0..count {
                let r = if i % 2 == 0 {
                    std::fs::hard_link(format!("{dir}/base"), format!("{dir}/h{i}"))
                } else {
                    symlink(&target, &format!("{dir}/s{i}"))
                };
                r.map_err(|e| stopped("link", i, e))?;
            }
            json!({"created": count})
        }
        "write_small" => {
            let bytes = a.u64("bytes", 1024) as usize;
            std::fs::write(&path, vec![b'y'; bytes]).map_err(io("write"))?;
            json!({"written": bytes})
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
                    description: format!("TEST ONLY: disk bomb `{}`", t.name),
                    input_schema: t.input_schema.to_string(),
                    output_schema: None,
                    annotations: Annotations {
                        read_only: false,
                        destructive: true,
                        idempotent: false,
                        open_world: false,
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
        assert_eq!(super::tools().len(), 9);
        assert!(super::call("nope", "{}").unwrap_err().0);
    }
}
