//! Asking a person about `approval = "ask"` tools.
//!
//! Shows the server, the tool (remote and local name) and the pretty-printed
//! arguments, then reads one answer: `y` (yes, once), `n` (no; also empty
//! input, end of input, anything else), `a` (always: yes for this tool of this
//! server for the rest of the run). Reader and writer are injected, so the
//! prompt is tested without a terminal; the binary uses stdin / stderr when
//! both are terminals, and the policy's `ask_default` otherwise.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use crate::run::interrupt::Stop;
use crate::tools::registry::{ApprovalRequest, Approver};
use crate::BoxFut;

type Io = (Box<dyn BufRead + Send>, Box<dyn Write + Send>);

/// The interactive approver.
pub struct PromptApprover {
    io: Arc<Mutex<Io>>,
    /// (server, remote tool) pairs answered with `a`.
    always: Arc<Mutex<HashSet<(String, String)>>>,
    /// Ctrl-C: a pending prompt is answered "no" at once.
    stop: Option<Stop>,
}

/// One answer at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    Always,
}

impl Answer {
    pub fn parse(line: &str) -> Self {
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Answer::Yes,
            "a" | "always" => Answer::Always,
            _ => Answer::No,
        }
    }
}

impl PromptApprover {
    pub fn new(reader: Box<dyn BufRead + Send>, writer: Box<dyn Write + Send>) -> Self {
        Self {
            io: Arc::new(Mutex::new((reader, writer))),
            always: Arc::new(Mutex::new(HashSet::new())),
            stop: None,
        }
    }

    /// Stop asking when `stop` fires: the prompt waiting then, and any
    /// later one, is a "no" (the call was never sent, nothing to cancel).
    pub fn with_stop(mut self, stop: Stop) -> Self {
        self.stop = Some(stop);
        self
    }

    /// On stdin / stderr.
    pub fn stdio() -> Self {
        Self::new(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }
}

/// (server, remote name, local name) of a request.
fn names(req: &ApprovalRequest<'_>) -> (String, String, String) {
    let local = req.call.local_name.clone();
    match &req.call.origin {
        Some(b) => (b.server_id.clone(), b.remote_name.clone(), local),
        None => ("(local)".into(), local.clone(), local),
    }
}

fn ask(io: &Mutex<Io>, server: &str, tool: &str, local: &str, args: &str) -> Answer {
    let mut guard = io.lock().unwrap_or_else(|e| e.into_inner());
    let (reader, writer) = &mut *guard;
    let safe = crate::run::progress::terminal_safe;
    let _ = writeln!(
        writer,
        "\napproval needed: server `{}`, tool `{}` ({})",
        safe(server),
        safe(tool),
        safe(local)
    );
    for line in args.lines() {
        let _ = writeln!(writer, "    {}", safe(line));
    }
    let _ = write!(
        writer,
        "run it? [y]es / [n]o / [a]lways for this tool in this run: "
    );
    let _ = writer.flush();
    let mut line = String::new();
    let answer = match reader.read_line(&mut line) {
        Ok(0) | Err(_) => Answer::No,
        Ok(_) => Answer::parse(&line),
    };
    let _ = writeln!(
        writer,
        "{}",
        if answer == Answer::No {
            "denied"
        } else {
            "approved"
        }
    );
    answer
}

impl Approver for PromptApprover {
    fn approve<'a>(&'a self, req: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool> {
        let (server, tool, local) = names(req);
        let key = (server.clone(), tool.clone());
        let args = serde_json::to_string_pretty(&req.call.args).unwrap_or_default();
        let (io, always, stop) = (self.io.clone(), self.always.clone(), self.stop.clone());
        Box::pin(async move {
            if stop.as_ref().is_some_and(Stop::is_set) {
                return false;
            }
            if always
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&key)
            {
                return true;
            }
            // Reading a terminal blocks: keep it off the async workers.
            let read = tokio::task::spawn_blocking(move || ask(&io, &server, &tool, &local, &args));
            let answer = match stop {
                Some(stop) => tokio::select! {
                    a = read => a.unwrap_or(Answer::No),
                    _ = stop.fired() => Answer::No,
                },
                None => read.await.unwrap_or(Answer::No),
            };
            if answer == Answer::Always {
                always.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
            }
            answer != Answer::No
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::naming::Binding;
    use crate::tools::registry::ToolCallInfo;
    use serde_json::json;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn call(tool: &str) -> ToolCallInfo {
        ToolCallInfo {
            session: "s".into(),
            local_name: format!("mcp_ws_{tool}"),
            origin: Some(Binding {
                server_id: "ws".into(),
                remote_name: tool.into(),
            }),
            args: json!({"path": "NOTES.md", "content": "x"}),
        }
    }

    async fn decide(a: &PromptApprover, tool: &str) -> bool {
        let c = call(tool);
        a.approve(&ApprovalRequest {
            call: &c,
            annotations: None,
        })
        .await
    }

    #[tokio::test]
    async fn ctrl_c_answers_a_waiting_prompt_no() {
        // A person who does not answer for 4 s (then end of input).
        struct Never;
        impl std::io::Read for Never {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                std::thread::sleep(std::time::Duration::from_secs(4));
                Ok(0)
            }
        }
        let (trigger, stop) = crate::run::interrupt::stop_pair();
        let a = PromptApprover::new(
            Box::new(std::io::BufReader::new(Never)),
            Box::new(Shared::default()),
        )
        .with_stop(stop);
        let c = call("write_file");
        let req = ApprovalRequest {
            call: &c,
            annotations: None,
        };
        let pending = a.approve(&req);
        tokio::pin!(pending);
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(200), &mut pending).await;
        assert!(waited.is_err(), "the prompt waits for an answer");
        trigger.fire();
        // At once, not when the reader gives up 4 s later.
        let answer = tokio::time::timeout(std::time::Duration::from_secs(2), pending)
            .await
            .expect("Ctrl-C ends the prompt");
        assert!(!answer);
        assert!(!decide(&a, "other").await, "no prompt after Ctrl-C");
    }

    #[tokio::test]
    async fn yes_no_always_and_end_of_input() {
        let out = Shared::default();
        let input = "y\nn\na\nmaybe\n";
        let a = PromptApprover::new(
            Box::new(std::io::Cursor::new(input.as_bytes().to_vec())),
            Box::new(out.clone()),
        );
        assert!(decide(&a, "write_file").await, "y");
        assert!(!decide(&a, "write_file").await, "n");
        assert!(decide(&a, "write_file").await, "a");
        assert!(decide(&a, "write_file").await, "always: not asked again");
        assert!(!decide(&a, "delete").await, "an unknown answer is no");
        assert!(!decide(&a, "delete").await, "end of input is no");
        let shown = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(shown.matches("approval needed").count(), 5, "{shown}");
        assert!(shown.contains("server `ws`, tool `write_file` (mcp_ws_write_file)"));
        assert!(
            shown.contains("\"path\": \"NOTES.md\""),
            "pretty-printed: {shown}"
        );
    }
}
