//! One task run: policy, git worktree, tool session, agent loop, trace.

pub mod agent;
pub mod policy;
pub mod session;
pub mod task;
pub mod trace;
pub mod worktree;
