//! The tool model the agent sees: local names and bindings, the per-round
//! catalog snapshot, the call pipeline, and call fault rules.

pub mod catalog;
pub mod faults;
pub mod naming;
pub mod pipeline;
pub mod tool;
