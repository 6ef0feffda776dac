//! The fleet view: a collective that crosses many nodes runs at the pace of the slowest member,
//! so per-node figures are aggregated (slowest, 10th percentile or median) and nodes that fall
//! behind the fleet median are named.

use serde::{Deserialize, Serialize};

/// How per-node figures become one fleet figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Aggregate {
    /// The slowest node: what a synchronous step waits for.
    Slowest,
    /// The 10th percentile: ignores the worst tenth.
    P10,
    /// The median node.
    Median,
}

impl Aggregate {
    /// Aggregates rates (higher is better).
    pub fn rate(self, values: &[f64]) -> f64 {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        match self {
            Aggregate::Slowest => v[0],
            Aggregate::P10 => percentile(&v, 0.10),
            Aggregate::Median => percentile(&v, 0.5),
        }
    }

    /// Aggregates costs (lower is better).
    pub fn cost(self, values: &[f64]) -> f64 {
        let mut v = values.to_vec();
        v.sort_by(|a, b| b.total_cmp(a));
        match self {
            Aggregate::Slowest => v[0],
            Aggregate::P10 => percentile(&v, 0.10),
            Aggregate::Median => percentile(&v, 0.5),
        }
    }
}

/// Linear-interpolated percentile of sorted values (sorted best-last for rates, best-first for
/// costs, so `q` always counts from the worst end).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A node behind the fleet on some figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Straggler {
    /// Node name.
    pub node: String,
    /// What was measured, e.g. `all_reduce x8 busbw` or `GEMM bf16 peak`.
    pub what: String,
    /// The node's figure.
    pub value: f64,
    /// The fleet median.
    pub fleet_median: f64,
}

impl Straggler {
    /// How far below the median, as a fraction.
    pub fn shortfall(&self) -> f64 {
        1.0 - self.value / self.fleet_median
    }
}

/// Nodes whose figure falls more than `threshold` below the median of `(node, value)` pairs.
pub fn stragglers(what: &str, values: &[(String, f64)], threshold: f64) -> Vec<Straggler> {
    if values.len() < 2 {
        return Vec::new();
    }
    let median = Aggregate::Median.rate(&values.iter().map(|v| v.1).collect::<Vec<_>>());
    values
        .iter()
        .filter(|(_, v)| *v < (1.0 - threshold) * median)
        .map(|(node, v)| Straggler {
            node: node.clone(),
            what: what.to_string(),
            value: *v,
            fleet_median: median,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_from_the_worst_end() {
        let rates = [
            10.0, 100.0, 90.0, 95.0, 100.0, 98.0, 97.0, 99.0, 96.0, 94.0, 93.0,
        ];
        assert_eq!(Aggregate::Slowest.rate(&rates), 10.0);
        assert_eq!(Aggregate::Median.rate(&rates), 96.0);
        assert_eq!(Aggregate::P10.rate(&rates), 90.0);
        assert_eq!(Aggregate::Slowest.cost(&[1.0, 3.0, 2.0]), 3.0);
    }

    #[test]
    fn names_the_node_behind() {
        let v: Vec<(String, f64)> = [("a", 100.0), ("b", 98.0), ("c", 60.0), ("d", 101.0)]
            .iter()
            .map(|(n, x)| (n.to_string(), *x))
            .collect();
        let s = stragglers("all_reduce x8 busbw", &v, 0.10);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].node, "c");
        assert!((s[0].shortfall() - (1.0 - 60.0 / 99.0)).abs() < 1e-12);
    }
}
