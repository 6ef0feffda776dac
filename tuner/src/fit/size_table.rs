//! A collective's measured times by size, for pricing sizes inside a sweep from the sweep
//! itself: piecewise linear in log(size) and log(time) between neighbouring measured sizes.
//! A dense lookup table (vTrain's 1,024 sizes from 1 MiB to 1 GiB) bends where NCCL changes
//! algorithm or protocol, which a two-piece alpha-beta curve smooths over by up to a third;
//! the curve still prices sizes near the sweep's ends.

/// Measured (bytes, seconds) points, sorted by size, one per size.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SizeTable {
    points: Vec<(f64, f64)>,
}

impl SizeTable {
    /// The table of `points`; several times at one size take their median. `None` with fewer
    /// than two sizes.
    pub fn new(points: &[(f64, f64)]) -> Option<SizeTable> {
        let mut pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|&(s, t)| s > 0.0 && t > 0.0 && s.is_finite() && t.is_finite())
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut out: Vec<(f64, f64)> = Vec::new();
        let mut i = 0;
        while i < pts.len() {
            let j = pts[i..].partition_point(|p| p.0 == pts[i].0) + i;
            let same = &pts[i..j];
            let mid = same.len() / 2;
            let median = if same.len() % 2 == 1 {
                same[mid].1
            } else {
                (same[mid - 1].1 + same[mid].1) / 2.0
            };
            out.push((pts[i].0, median));
            i = j;
        }
        (out.len() >= 2).then_some(SizeTable { points: out })
    }

    /// The fleet's table: at every size all `tables` measured, `aggregate` of their times.
    pub fn aggregate(
        tables: &[&SizeTable],
        aggregate: super::fleet::Aggregate,
    ) -> Option<SizeTable> {
        let first = tables.first()?;
        let common: Vec<(f64, f64)> = first
            .points
            .iter()
            .filter_map(|&(s, _)| {
                let times: Option<Vec<f64>> = tables.iter().map(|t| t.exact(s)).collect();
                times.map(|t| (s, aggregate.cost(&t)))
            })
            .collect();
        SizeTable::new(&common)
    }

    fn exact(&self, bytes: f64) -> Option<f64> {
        let i = self.points.partition_point(|p| p.0 < bytes);
        self.points.get(i).filter(|p| p.0 == bytes).map(|p| p.1)
    }

    /// The time at `bytes` when it lies within the measured sizes.
    pub fn time_s(&self, bytes: f64) -> Option<f64> {
        let (lo, hi) = (self.points[0], self.points[self.points.len() - 1]);
        if !(bytes >= lo.0 && bytes <= hi.0) {
            return None;
        }
        let i = self.points.partition_point(|p| p.0 < bytes);
        let b = self.points[i];
        if b.0 == bytes || i == 0 {
            return Some(b.1);
        }
        let a = self.points[i - 1];
        let f = (bytes.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
        Some((a.1.ln() + f * (b.1.ln() - a.1.ln())).exp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::fleet::Aggregate;

    /// 1 MiB in 92.79 us and 2 MiB in 93.25 us (vTrain's A100 8-GPU table): 1.5 MiB lies at
    /// log2(1.5) = 0.585 of the way in log size, so exp(ln 92.79 + 0.585 (ln 93.25 - ln 92.79)).
    #[test]
    fn interpolates_in_log_log_and_stays_inside() {
        let mib = 1048576.0;
        let t = SizeTable::new(&[(mib, 92.79e-6), (2.0 * mib, 93.25e-6), (mib, 92.79e-6)]).unwrap();
        assert_eq!(t.points.len(), 2);
        let f = 1.5f64.log2();
        let expected = (92.79e-6f64.ln() + f * (93.25e-6f64.ln() - 92.79e-6f64.ln())).exp();
        assert!((t.time_s(1.5 * mib).unwrap() - expected).abs() < 1e-15);
        assert_eq!(t.time_s(mib), Some(92.79e-6));
        assert_eq!(t.time_s(4.0 * mib), None);
        assert_eq!(t.time_s(0.5 * mib), None);
    }

    #[test]
    fn the_fleet_keeps_the_common_sizes_at_the_slowest_time() {
        let a = SizeTable::new(&[(1.0, 1.0), (2.0, 2.0), (4.0, 4.0)]).unwrap();
        let b = SizeTable::new(&[(2.0, 3.0), (4.0, 3.0), (8.0, 9.0)]).unwrap();
        let f = SizeTable::aggregate(&[&a, &b], Aggregate::Slowest).unwrap();
        assert_eq!(f.points, [(2.0, 3.0), (4.0, 4.0)]);
    }
}
