//! Ctrl-C on the real `wasm-agent` binary while a tool call hangs (the
//! hostile plugin's `spin`): the call is cancelled (`notifications/cancelled`),
//! the run shuts down in order, the work done so far is committed on
//! `agent/<run-id>`, the worktree is removed, and the exit status is 130.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{agent_bin, git, plugin_dir, sample_repo, write_policy};

const TASK: &str = r#"
id = "interrupted"
prompt = "write notes, then hang"
[scripted]
final_message = "never reached"
[[scripted.steps]]
tool = "write_file"
args = { path = "NOTES.md", content = "written before Ctrl-C\n" }
[[scripted.steps]]
tool = "spin"
args = {}
"#;

#[test]
fn ctrl_c_during_a_hanging_call_keeps_the_work_and_exits_130() {
    let mut run = Hanging::start();
    std::thread::sleep(Duration::from_millis(300));
    let kill = Command::new("kill")
        .args(["-INT", &run.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // Ends near the cancel, not when the 120 s tool timeout fires.
    let status = run.status_within(Duration::from_secs(60));
    let log: Vec<String> = run.lines.try_iter().collect();
    let log = log.join("\n");
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(log.contains("interrupted"), "{log}");

    // The work before Ctrl-C is one commit on the kept branch.
    let repo = &run.repo;
    let runs = run.scratch.path().join("runs");
    let branch = &run.branch();
    assert!(branch.starts_with("agent/interrupted-"), "{branch}\n{log}");
    let notes = git(repo.path(), &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    let msg = git(repo.path(), &["log", "-1", "--format=%B", branch]);
    assert!(msg.contains("interrupted"), "{msg}");
    assert!(
        log.contains(&format!("work committed on branch {branch}")),
        "{log}"
    );
    // Worktree removed.
    let wts = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(wts.matches("worktree ").count(), 1, "{wts}");
    // The trace was persisted, with the cancellation of the call in flight.
    let run_dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().any(|e| e["kind"] == "call_cancelled"));
    let spin = events
        .iter()
        .find(|e| e["kind"] == "tool_call" && e["origin"]["remote_name"] == "spin")
        .expect("spin call recorded");
    assert_eq!(spin["state"], "unknown", "{spin}");
    assert!(
        spin["result"].as_str().unwrap().contains("cancelled"),
        "{spin}"
    );
    assert_eq!(events.last().unwrap()["kind"], "task_end");
}

const ASK_TASK: &str = r#"
id = "asked"
prompt = "write two files"
[scripted]
final_message = "done"
[[scripted.steps]]
tool = "write_file"
args = { path = "NOTES.md", content = "approved at the prompt\n" }
[[scripted.steps]]
tool = "write_file"
args = { path = "MORE.md", content = "approved by always\n" }
"#;

/// A policy whose `write_file` needs approval (`ask`, ask_default deny).
fn ask_policy(dir: &std::path::Path, plugins: &std::path::Path) -> std::path::PathBuf {
    let policy = write_policy(dir, plugins, &[], &["write_file"], &[], 60_000);
    let text = std::fs::read_to_string(&policy).unwrap();
    let asked = text.replace("approval = \"auto\"", "approval = \"ask\"");
    assert_ne!(text, asked);
    std::fs::write(&policy, asked).unwrap();
    policy
}

/// `cmd` run on a terminal (`script` makes the pty), its output collected
/// by a thread.
struct Terminal {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Terminal {
    fn start(cmd: &str, dir: &std::path::Path) -> Terminal {
        let mut child = Command::new("script")
            .args(["-q", "-e", "-f", "-c", cmd, "/dev/null"])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let reader = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                use std::io::Read;
                let mut buf = [0u8; 4096];
                while let Ok(n) = stdout.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        Terminal {
            child,
            stdin,
            seen,
            reader,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    /// Waits (up to 120 s) until the terminal shows `needle`; the run must
    /// still be going.
    fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.text().contains(needle) {
            assert!(Instant::now() < deadline, "no {needle}:\n{}", self.text());
            let running = self.child.try_wait().unwrap().is_none();
            assert!(running, "exited:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn type_keys(&mut self, keys: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(keys).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits up to `secs` for the run to end; its status and all it showed.
    fn wait_exit(mut self, secs: u64, what: &str) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "{what}:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(50));
        };
        drop(self.stdin);
        self.reader.join().unwrap();
        let out = String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned();
        (status, out)
    }
}

fn shell_quote(p: &std::path::Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// On a terminal (a pty made by `script`), `approval = "ask"` prompts with
/// the server, tool and arguments; `a` approves this call and the next one of
/// the same tool without asking again.
#[test]
fn ask_prompts_on_a_terminal_and_always_is_remembered() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (util-linux) not found");
        return;
    }
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let policy = ask_policy(scratch.path(), plugins.path());
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, ASK_TASK).unwrap();
    let cmd = format!(
        "{} run-task --provider scripted --policy {} --task {} --out-dir {}",
        shell_quote(&agent_bin()),
        shell_quote(&policy),
        shell_quote(&task),
        shell_quote(&scratch.path().join("runs")),
    );
    let mut term = Terminal::start(&cmd, repo.path());
    term.wait_for("run it?");
    term.type_keys(b"a\n");
    let (status, out) = term.wait_exit(120, "no exit");
    assert_eq!(status.code(), Some(0), "{out}");
    assert_eq!(out.matches("approval needed").count(), 1, "{out}");
    assert!(
        out.contains("server `ws`, tool `write_file`") && out.contains("\"path\": \"NOTES.md\""),
        "{out}"
    );
    let branch = git(
        repo.path(),
        &["branch", "--list", "agent/*", "--format=%(refname:short)"],
    );
    let branch = branch.trim();
    assert_eq!(
        git(repo.path(), &["show", &format!("{branch}:NOTES.md")]),
        "approved at the prompt\n"
    );
    assert_eq!(
        git(repo.path(), &["show", &format!("{branch}:MORE.md")]),
        "approved by always\n"
    );
}

/// Ctrl-C typed at the prompt (the pty turns `^C` into SIGINT for the
/// foreground group): the prompt is a "no" at once, the run stops and exits
/// 130, and the MCP server, in its own process group, was not hit by the
/// terminal's signal: it is closed in order, not lost.
#[test]
fn ctrl_c_typed_at_the_prompt_stops_the_run() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (util-linux) not found");
        return;
    }
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let policy = ask_policy(scratch.path(), plugins.path());
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, ASK_TASK).unwrap();
    let runs = scratch.path().join("runs");
    let cmd = format!(
        "{} run-task --provider scripted --policy {} --task {} --out-dir {}",
        shell_quote(&agent_bin()),
        shell_quote(&policy),
        shell_quote(&task),
        shell_quote(&runs),
    );
    let mut term = Terminal::start(&cmd, repo.path());
    term.wait_for("run it?");
    term.type_keys(b"\x03");
    let (status, out) = term.wait_exit(60, "no exit after ^C");
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(out.contains("INTERRUPTED"), "{out}");
    let run_dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = events
        .iter()
        .find(|e| e["kind"] == "tool_call")
        .expect("the asked call ended (not abandoned after the cancel grace)");
    assert!(
        call["result"].as_str().unwrap().contains("not approved"),
        "{call}"
    );
    let closed = events
        .iter()
        .find(|e| e["kind"] == "server_closed")
        .expect("server closed");
    assert_eq!(closed["state"], "Closed", "{closed}");
    assert_eq!(
        git(repo.path(), &["branch", "--list", "agent/*"]).trim(),
        ""
    );
}

/// Without a terminal the same policy falls back to `ask_default` (deny):
/// no prompt, nothing written, no branch left.
#[test]
fn ask_without_a_terminal_uses_ask_default() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let policy = ask_policy(scratch.path(), plugins.path());
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, ASK_TASK).unwrap();
    let out = Command::new(agent_bin())
        .args(["run-task", "--provider", "scripted", "--policy"])
        .arg(&policy)
        .arg("--task")
        .arg(&task)
        .arg("--out-dir")
        .arg(scratch.path().join("runs"))
        .current_dir(repo.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("approval needed"), "{err}");
    assert!(err.contains("not approved"), "{err}");
    assert!(err.contains("no changes"), "{err}");
    let branches = git(repo.path(), &["branch", "--list", "agent/*"]);
    assert!(branches.trim().is_empty(), "{branches}");
}

/// A run of [`TASK`] that has written NOTES.md and hangs in `spin`: its
/// repository, scratch dir and process, once the spin call was sent.
struct Hanging {
    repo: tempfile::TempDir,
    scratch: tempfile::TempDir,
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Hanging {
    fn start() -> Hanging {
        let repo = sample_repo();
        let scratch = tempfile::tempdir().unwrap();
        let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
        let policy = write_policy(
            scratch.path(),
            plugins.path(),
            &["--timeout-ms", "120000"],
            &["write_file", "spin"],
            &[],
            120_000,
        );
        let task = scratch.path().join("task.toml");
        std::fs::write(&task, TASK).unwrap();
        let mut child = Command::new(agent_bin())
            .args(["run-task", "--provider", "scripted", "--policy"])
            .arg(&policy)
            .arg("--task")
            .arg(&task)
            .arg("--out-dir")
            .arg(scratch.path().join("runs"))
            .current_dir(repo.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        while !lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("spin call never started")
            .contains("→ ws.spin")
        {}
        Hanging {
            repo,
            scratch,
            child,
            lines,
        }
    }

    /// Its exit status, within `limit`.
    fn status_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "no exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The run's `agent/*` branch.
    fn branch(&self) -> String {
        let listed = git(
            self.repo.path(),
            &["branch", "--list", "agent/*", "--format=%(refname:short)"],
        );
        listed.trim().to_string()
    }
}

/// A second Ctrl-C exits at once (130), and nothing is lost: the work is
/// either committed on the branch or still in the worktree.
#[test]
fn a_second_ctrl_c_exits_at_once_and_loses_nothing() {
    let mut run = Hanging::start();
    let pid = run.child.id().to_string();
    for _ in 0..2 {
        assert!(Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
        // Past the window in which a second signal is the same request.
        std::thread::sleep(Duration::from_millis(700));
    }
    let status = run.status_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130));
    let branch = run.branch();
    let repo = &run.repo;
    let committed = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["show", &format!("{branch}:NOTES.md")])
        .output()
        .unwrap();
    let in_worktree = std::fs::read_dir(repo.path().join(".worktrees"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| d.path().join("NOTES.md").is_file());
    assert!(
        committed.status.success() || in_worktree,
        "the work is neither committed on {branch:?} nor in its worktree"
    );
}

/// One stop request delivered as two signals at once (GNU `timeout`
/// signals the process and then its group; so do CI runners): it is one
/// interruption, and the work is committed. It exited "interrupted twice"
/// without committing in about one run of four (a helper's find).
#[test]
fn a_doubled_signal_is_one_interruption_and_the_work_is_committed() {
    let mut run = Hanging::start();
    let pid = run.child.id().to_string();
    // Both signals from one `kill`: SIGTERM twice, back to back.
    assert!(Command::new("sh")
        .args(["-c", &format!("kill -TERM {pid}; kill -TERM {pid}")])
        .status()
        .unwrap()
        .success());
    let status = run.status_within(Duration::from_secs(60));
    let log: Vec<String> = run.lines.try_iter().collect();
    let log = log.join("\n");
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(!log.contains("interrupted twice"), "{log}");
    let notes = git(
        run.repo.path(),
        &["show", &format!("{}:NOTES.md", run.branch())],
    );
    assert_eq!(notes, "written before Ctrl-C\n", "{log}");
}

/// A run killed with `kill -9` cannot commit its work: it stays in the
/// worktree, and `wasm-agent recover` commits it on the run's branch and
/// removes the worktree. Refused, with nothing changed: while the run is
/// alive (it holds the worktree's lock), while the killed run's server
/// still finishes its last call there (it may still write), a directory
/// that is no task's worktree (the repository itself, a user's own linked
/// worktree on an `agent/` branch), and a run id named from inside a
/// worktree. Run from inside the worktree with a `.git` a tool planted
/// there, it still commits on the run's own branch (a helper's find: it
/// committed into the tool's repository, and deleted the work).
#[test]
fn the_work_of_a_killed_run_is_recovered_on_its_branch() {
    let mut run = Hanging::start();
    let repo = run.repo.path().to_path_buf();
    let worktrees: Vec<_> = std::fs::read_dir(repo.join(".worktrees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(worktrees.len(), 1, "{worktrees:?}");
    let wt = worktrees[0].clone();
    let run_id = wt.file_name().unwrap().to_str().unwrap().to_string();
    let recover_in = |cwd: &std::path::Path, which: &str| {
        let out = Command::new(agent_bin())
            .args(["recover", which])
            .current_dir(cwd)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let refused = |cwd: &std::path::Path, which: &str, why: &str| {
        let (code, err) = recover_in(cwd, which);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(why), "{err}");
        err
    };
    let pid_in = |err: &str| -> String {
        let pid = err.split("(pid ").nth(1).and_then(|s| s.split(')').next());
        pid.unwrap().to_string()
    };
    let kill = |pid: &str| {
        assert!(Command::new("kill")
            .args(["-KILL", pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // The run is alive.
    let err = refused(&repo, &run_id, "is still working in");
    assert_eq!(pid_in(&err), run.child.id().to_string(), "{err}");
    kill(&run.child.id().to_string());
    run.status_within(Duration::from_secs(10));
    assert!(wt.join("NOTES.md").is_file());
    // Its server is still in its 120 s `spin` call.
    let err = refused(&repo, &run_id, "is still working in");
    kill(&pid_in(&err));
    // No task's worktree: the repository, a user's own worktree on an
    // `agent/` branch (beside the repository, and under `.worktrees`).
    refused(&repo, ".", "is not the worktree of a wasm-agent task");
    git(&repo, &["branch", "agent/mine", "HEAD"]);
    let mine = repo.with_extension("mine");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "--quiet",
            mine.to_str().unwrap(),
            "agent/mine",
        ],
    );
    refused(
        &repo,
        mine.to_str().unwrap(),
        "is not the worktree of a wasm-agent task",
    );
    git(&repo, &["branch", "agent/mine2", "HEAD"]);
    git(
        &repo,
        &[
            "worktree",
            "add",
            "--quiet",
            ".worktrees/mine2",
            "agent/mine2",
        ],
    );
    refused(&repo, "mine2", "is not the worktree of a wasm-agent task");
    // A tool's repository planted as the worktree's `.git`, with a branch
    // of its own, and a link named as the run to a layout the tool made
    // (`.worktrees/x` inside the worktree): from inside, a run id is
    // refused, the link leads to no task, and `.` is the run's own.
    let planted = wt.join(".git");
    std::fs::remove_file(&planted).unwrap();
    git(&wt, &["init", "--quiet", "-b", "agent/foo"]);
    assert!(planted.is_dir());
    std::fs::create_dir_all(wt.join(".worktrees/x")).unwrap();
    std::os::unix::fs::symlink(".worktrees/x", wt.join(&run_id)).unwrap();
    // The tool's repository shares the real one's refs and objects, and
    // records `.worktrees/x` as a task's worktree on the run's branch.
    for shared in ["refs", "objects"] {
        std::fs::remove_dir_all(planted.join(shared)).unwrap();
        let real = repo.join(".git").join(shared);
        std::os::unix::fs::symlink(real, planted.join(shared)).unwrap();
    }
    let admin = planted.join("worktrees/x");
    std::fs::create_dir_all(&admin).unwrap();
    let fake_gitdir = format!("{}\n", wt.join(".worktrees/x/.git").display());
    std::fs::write(admin.join("gitdir"), fake_gitdir).unwrap();
    std::fs::write(
        admin.join("HEAD"),
        format!("ref: refs/heads/agent/{run_id}\n"),
    )
    .unwrap();
    std::fs::write(admin.join("wasm-agent.lock"), "1").unwrap();
    refused(&wt, &run_id, "is inside a task's worktree");
    refused(
        &wt,
        &format!("./{run_id}"),
        "is not the worktree of a wasm-agent task",
    );
    std::fs::remove_file(wt.join(&run_id)).unwrap();
    std::fs::remove_dir_all(wt.join(".worktrees")).unwrap();
    std::fs::remove_dir_all(planted.join("worktrees")).unwrap();
    // From a shell in the worktree (the shell is not counted as working
    // there), the worktree kept.
    let script = format!(
        "cd '{}' && '{}' recover --keep-worktree .; e=$?; exit $e",
        wt.display(),
        agent_bin().display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let branch = format!("agent/{run_id}");
    assert!(
        err.contains(&format!("work committed on branch {branch}")),
        "{err}"
    );
    let notes = git(&repo, &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    assert!(wt.is_dir(), "the worktree is kept");
    // Again, with nothing new: the branch keeps the commit (a recover
    // after a committed one deleted the branch).
    let again = Command::new(agent_bin())
        .args(["recover", "--keep-worktree", &run_id])
        .current_dir(&repo)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&again.stderr).into_owned();
    assert_eq!(again.status.code(), Some(0), "{err}");
    let kept = format!("branch {branch} kept as it was");
    assert!(err.contains(&kept), "{err}");
    let notes = git(&repo, &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    // A removal cut short after the commit (marked committed, files
    // gone): what is left is removed, not committed as deletions.
    let admin = repo.join(".git/worktrees").join(&run_id);
    std::fs::write(admin.join("wasm-agent.committed"), "").unwrap();
    std::fs::remove_file(wt.join("NOTES.md")).unwrap();
    // Kept, the remains are a kept worktree like any other: a `.git` a
    // tool wrote below its root is set aside (a `git status` there would
    // run its config), its index follows the branch, nothing is committed.
    let tool_git = wt.join("sub/.git");
    std::fs::create_dir_all(&tool_git).unwrap();
    std::fs::write(
        tool_git.join("config"),
        "[core]\n\tfsmonitor = touch pwned\n",
    )
    .unwrap();
    let kept_remains = Command::new(agent_bin())
        .args(["recover", "--keep-worktree", &run_id])
        .current_dir(&repo)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&kept_remains.stderr).into_owned();
    assert_eq!(kept_remains.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&kept) && err.contains("set aside in it: sub/"),
        "{err}"
    );
    assert!(
        !tool_git.exists(),
        "the tool's .git is still in the kept remains"
    );
    let status = git(&wt, &["status", "--porcelain"]);
    let status: Vec<&str> = status.lines().collect();
    assert_eq!(
        status,
        [" D NOTES.md", "?? sub/"],
        "the index follows the branch"
    );
    let notes = git(&repo, &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    // Kept, they are no longer remains: what is there is committed by the
    // next `recover` (here nothing, once restored to the branch).
    assert!(!admin.join("wasm-agent.committed").exists());
    git(&wt, &["restore", "NOTES.md"]);
    std::fs::remove_dir_all(wt.join("sub")).unwrap();
    let (code, err) = recover_in(&repo, &run_id);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&kept), "{err}");
    let notes = git(&repo, &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    assert!(!wt.exists(), "the worktree is removed");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains(&run_id), "{listed}");
    // Nothing is left to recover.
    refused(&repo, &run_id, "is not the worktree of a wasm-agent task");
    let _ = std::fs::remove_dir_all(&mine);
}
