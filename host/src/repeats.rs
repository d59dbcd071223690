//! An event that can repeat without bound (a refused connection, a dropped
//! line, a lost audit line), counted and logged the first time and then at
//! each power of two, so that a flood of it cannot flood the log.

use std::sync::atomic::{AtomicU64, Ordering};

/// How often an event happened.
#[derive(Debug, Default)]
pub struct Repeats(AtomicU64);

impl Repeats {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Counts one more; the total when this one is to be logged (the 1st,
    /// 2nd, 4th, 8th, …).
    pub fn note(&self) -> Option<u64> {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_power_of_two().then_some(n)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn logged_at_the_first_and_each_power_of_two() {
        let r = super::Repeats::new();
        let logged: Vec<u64> = (0..100).filter_map(|_| r.note()).collect();
        assert_eq!(logged, [1, 2, 4, 8, 16, 32, 64]);
    }
}
