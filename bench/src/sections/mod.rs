//! The bench's sections, one module each, run in this order.

pub mod concurrency;
pub mod in_process;
pub mod memory;
pub mod output_check;
pub mod scaling;
pub mod sequential;
pub mod sizes;
pub mod startup;
