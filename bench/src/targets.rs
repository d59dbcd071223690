//! What the sections measured that the targets need, and the targets table
//! (PASS/MISS; a miss never fails the run).

use crate::stats::Stats;

/// One sequential series' summary.
pub struct SeriesSummary {
    pub p50_ms: f64,
    pub rate: f64,
}

impl From<&Stats> for SeriesSummary {
    fn from(s: &Stats) -> Self {
        SeriesSummary {
            p50_ms: crate::stats::ms(s.p50),
            rate: s.rate,
        }
    }
}

/// Small and large file of one server.
#[derive(Default)]
pub struct PerFile {
    pub small: Option<SeriesSummary>,
    pub large: Option<SeriesSummary>,
}

/// Everything the targets table reads; `None`: that section did not run.
#[derive(Default)]
pub struct Results {
    pub ours: PerFile,
    pub floor: PerFile,
    pub baseline: PerFile,
    pub peer: PerFile,
    /// Ours on the small file again, after the large file's calls.
    pub ours_small_after_large: Option<SeriesSummary>,
    /// Ours with the on-demand allocator, small file before and after the
    /// large calls: the control for the row above. Same server and client,
    /// no pool slot to keep anything, so what the client and the server
    /// keep of large calls shows in both and the slot's residue in ours.
    pub on_demand_small: Option<SeriesSummary>,
    pub on_demand_small_after_large: Option<SeriesSummary>,
    pub cold_ms: Option<f64>,
    pub warm_ms: Option<f64>,
    pub inst_pooling_us: Option<f64>,
    pub inst_on_demand_us: Option<f64>,
    /// A whole in-process `read_file` (small) with the pooling allocator.
    pub call_pooling_us: Option<f64>,
    /// A ready spare taken for a call, p50 (µs).
    pub spare_take_us: Option<f64>,
    /// A whole call on a spare, p50 (µs).
    pub call_on_spare_us: Option<f64>,
    pub idle_rss_mib: Option<f64>,
    pub pss_at_16_mib: Option<f64>,
}

/// A measured value against its bound.
struct Row {
    target: String,
    measured: Option<String>,
    ok: Option<bool>,
}

fn row(target: impl Into<String>, measured: Option<(String, bool)>) -> Row {
    let (measured, ok) = match measured {
        Some((m, ok)) => (Some(m), Some(ok)),
        None => (None, None),
    };
    Row {
        target: target.into(),
        measured,
        ok,
    }
}

/// `a/b`, at least `min`.
fn at_least(a: f64, b: f64, min: f64) -> (String, bool) {
    (format!("{:.2}x", a / b), a / b >= min)
}

impl Results {
    /// Ours' small-file p50 after the large calls over before, against the
    /// on-demand allocator's (the control: it has no slot to keep pages in).
    fn after_large_over_on_demand(&self) -> Option<(String, bool)> {
        let (ob, oa) = zip(
            self.ours.small.as_ref(),
            self.ours_small_after_large.as_ref(),
        )?;
        let (db, da) = zip(
            self.on_demand_small.as_ref(),
            self.on_demand_small_after_large.as_ref(),
        )?;
        let (ours, control) = (oa.p50_ms / ob.p50_ms, da.p50_ms / db.p50_ms);
        let over = ours / control;
        Some((
            format!("{ours:.2}x / {control:.2}x = {over:.2}x"),
            over <= 1.25,
        ))
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let (o, b, f, p) = (&self.ours, &self.baseline, &self.floor, &self.peer);
        rows.push(row(
            "small read_file p50 <= 1.5 x (floor p50 + in-process call p50)",
            zip3(o.small.as_ref(), f.small.as_ref(), self.call_pooling_us).map(|(o, f, call)| {
                let bound = f.p50_ms + call / 1e3;
                (
                    format!(
                        "{:.3} / {:.3} ms = {:.2}x",
                        o.p50_ms,
                        bound,
                        o.p50_ms / bound
                    ),
                    o.p50_ms <= 1.5 * bound,
                )
            }),
        ));
        rows.push(row(
            "  the same, the in-process call on a spare (as served)",
            zip3(o.small.as_ref(), f.small.as_ref(), self.call_on_spare_us).map(|(o, f, call)| {
                let bound = f.p50_ms + call / 1e3;
                (format!("{:.2}x", o.p50_ms / bound), o.p50_ms <= 1.5 * bound)
            }),
        ));
        rows.push(row(
            "  small p50 after/before large calls <= 1.25 x on-demand's (project's own)",
            self.after_large_over_on_demand(),
        ));
        rows.push(row(
            ">= 15x the baseline's calls/s, small file",
            zip(o.small.as_ref(), b.small.as_ref()).map(|(o, b)| at_least(o.rate, b.rate, 15.0)),
        ));
        rows.push(row(
            ">= 3x the baseline's calls/s, large file",
            zip(o.large.as_ref(), b.large.as_ref()).map(|(o, b)| at_least(o.rate, b.rate, 3.0)),
        ));
        rows.push(row(
            "large file p50 >= 3x lower than the baseline's",
            zip(o.large.as_ref(), b.large.as_ref()).map(|(o, b)| at_least(b.p50_ms, o.p50_ms, 3.0)),
        ));
        for (name, ours, peer) in [
            ("small", o.small.as_ref(), p.small.as_ref()),
            ("large", o.large.as_ref(), p.large.as_ref()),
        ] {
            rows.push(row(
                format!(">= 2x the peer's calls/s, {name} file"),
                zip(ours, peer).map(|(o, p)| at_least(o.rate, p.rate, 2.0)),
            ));
        }
        rows.push(row(
            "instantiation p50 <= 10 µs (pooling)",
            self.inst_pooling_us
                .map(|v| (format!("{v:.1} µs"), v <= 10.0)),
        ));
        rows.push(row(
            "  a served call's wait for its instance p50 <= 10 µs (spare ready)",
            self.spare_take_us
                .map(|v| (format!("{v:.1} µs"), v <= 10.0)),
        ));
        rows.push(row(
            "instantiation in the tens of µs (on-demand, p50)",
            self.inst_on_demand_us
                .map(|v| (format!("{v:.1} µs"), v < 100.0)),
        ));
        rows.push(row(
            "cold start <= 100 ms (median)",
            self.cold_ms.map(|v| (format!("{v:.1} ms"), v <= 100.0)),
        ));
        rows.push(row(
            "warm start < 50 ms (median)",
            self.warm_ms.map(|v| (format!("{v:.1} ms"), v < 50.0)),
        ));
        rows.push(row(
            "idle RSS <= 40 MiB, all Rust sample plugins",
            self.idle_rss_mib
                .map(|v| (format!("{v:.1} MiB"), v <= 40.0)),
        ));
        rows.push(row(
            "PSS per server with 16 running <= 24 MiB",
            self.pss_at_16_mib
                .map(|v| (format!("{v:.1} MiB"), v <= 24.0)),
        ));
        rows
    }

    /// The table; rows whose inputs were not measured say so.
    pub fn print(&self) {
        println!("== targets ==");
        println!("{:<64} {:>30} {:>6}", "target", "measured", "result");
        for r in self.rows() {
            let result = match r.ok {
                Some(true) => "PASS",
                Some(false) => "MISS",
                None => "-",
            };
            let measured = r.measured.unwrap_or_else(|| "not measured".into());
            println!("{:<64} {:>30} {:>6}", r.target, measured, result);
        }
    }
}

fn zip<A, B>(a: Option<A>, b: Option<B>) -> Option<(A, B)> {
    a.zip(b)
}

fn zip3<A, B, C>(a: Option<A>, b: Option<B>, c: Option<C>) -> Option<(A, B, C)> {
    Some((a?, b?, c?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p50_ms: f64, rate: f64) -> Option<SeriesSummary> {
        Some(SeriesSummary { p50_ms, rate })
    }

    fn find<'a>(rows: &'a [Row], prefix: &str) -> &'a Row {
        rows.iter().find(|r| r.target.starts_with(prefix)).unwrap()
    }

    #[test]
    fn targets_pass_and_miss_on_their_bounds_and_skip_what_was_not_measured() {
        let r = Results {
            ours: PerFile {
                small: s(0.30, 3000.0),
                large: s(10.0, 100.0),
            },
            floor: PerFile {
                small: s(0.10, 9000.0),
                large: None,
            },
            baseline: PerFile {
                small: s(4.0, 250.0),
                large: s(36.0, 26.0),
            },
            ours_small_after_large: s(0.40, 2500.0),
            on_demand_small: s(0.32, 2900.0),
            on_demand_small_after_large: s(0.32, 2900.0),
            call_pooling_us: Some(100.0),
            inst_pooling_us: Some(10.5),
            spare_take_us: Some(2.0),
            call_on_spare_us: Some(40.0),
            ..Results::default()
        };
        let rows = r.rows();
        // 0.30 <= 1.5 * (0.10 + 0.10)
        assert_eq!(find(&rows, "small read_file p50").ok, Some(true));
        // 12x < 15x
        assert_eq!(find(&rows, ">= 15x").ok, Some(false));
        assert_eq!(find(&rows, ">= 3x the baseline's calls/s").ok, Some(true));
        assert_eq!(find(&rows, "large file p50").ok, Some(true));
        // 0.30 > 1.5 * (0.10 + 0.04)
        assert_eq!(
            find(&rows, "  the same, the in-process call on a spare").ok,
            Some(false)
        );
        // (0.40 / 0.30) / (0.32 / 0.32) = 1.33 > 1.25
        assert_eq!(
            find(&rows, "  small p50 after/before large").ok,
            Some(false)
        );
        assert_eq!(find(&rows, "instantiation p50 <= 10").ok, Some(false));
        assert_eq!(find(&rows, "  a served call's wait").ok, Some(true));
        assert_eq!(find(&rows, ">= 2x the peer's calls/s, small").ok, None);
        assert_eq!(find(&rows, "cold start").measured, None);
        let drifted = Results {
            on_demand_small_after_large: s(0.384, 2500.0),
            ..r
        };
        // (0.40 / 0.30) / (0.384 / 0.32) = 1.11: the client slowed both
        let rows = drifted.rows();
        assert_eq!(find(&rows, "  small p50 after/before large").ok, Some(true));
    }
}
