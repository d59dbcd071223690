//! One task run: policy, git worktree, tool session, agent loop, trace.

pub mod agent;
pub mod approve_tty;
pub mod cleanup;
pub mod git;
pub mod interrupt;
pub mod keep;
pub mod policy;
pub mod progress;
pub mod recover;
pub mod repo_dirs;
pub mod session;
pub mod stage;
pub mod task;
pub mod trace;
pub mod worktree;
