//! Percentiles, rates and the number formats of the tables.

use std::time::Duration;

/// A timed series.
pub struct Stats {
    pub n: usize,
    pub p50: Duration,
    pub p99: Duration,
    /// calls per second over the whole series (wall clock).
    pub rate: f64,
}

impl Stats {
    pub fn new(mut samples: Vec<Duration>, wall: Duration) -> Stats {
        samples.sort();
        let n = samples.len();
        Stats {
            n,
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
            rate: n as f64 / wall.as_secs_f64(),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    percentile(&v, 50.0)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `a / b` as `1.23x`, `-` when `b` is zero.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }
}
