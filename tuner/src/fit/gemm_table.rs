//! Measured GEMM efficiency by shape and layout, for pricing every GEMM the cost model prices.
//!
//! A sweep measures some shapes; a layer runs others. Between measured shapes the efficiency
//! is interpolated in log2(m, n, k) space: trilinearly where the sweep is a grid around the
//! shape (the 8 corners measured), else from the nearest measured shapes weighted by inverse
//! squared distance. Shapes outside the measured box are [`Lookup::Outside`]: the caller
//! prices them from the catalog's shape curve anchored to the measured efficiency at the
//! nearest measured shape, and says so. Each layout (tn forward, nn input gradient, nt weight
//! gradient) is read from its own points where measured, else from every layout's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use record::{GemmLayout, Record};

use super::fleet::Aggregate;

/// How a shape's efficiency was found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lookup {
    /// Inside the measured box: interpolated (or measured exactly).
    Inside(f64),
    /// Outside it: the measured efficiency at `nearest`, the box's closest shape, for the
    /// caller to scale by its own shape curve.
    Outside {
        /// Measured efficiency at the nearest shape.
        efficiency: f64,
        /// That shape, (m, n, k).
        nearest: [f64; 3],
    },
}

/// The points of one layout (or of all pooled).
#[derive(Debug)]
struct Points {
    /// (log2 m, log2 n, log2 k) and efficiency against the datasheet peak.
    pts: Vec<([f64; 3], f64)>,
    /// Distinct log2 values per dimension, sorted.
    axes: [Vec<f64>; 3],
    /// Index of each grid point by its axis positions.
    grid: HashMap<[usize; 3], usize>,
    lo: [f64; 3],
    hi: [f64; 3],
}

/// Within this much of a measured value (in log2) a coordinate is that value.
const SNAP: f64 = 1e-6;

/// Nearest points an off-grid shape is interpolated from.
const NEIGHBOURS: usize = 8;

impl Points {
    fn new(mut pts: Vec<([f64; 3], f64)>) -> Points {
        pts.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        let axis = |d: usize| {
            let mut v: Vec<f64> = pts.iter().map(|p| p.0[d]).collect();
            v.sort_by(f64::total_cmp);
            v.dedup_by(|a, b| (*a - *b).abs() < SNAP);
            v
        };
        let axes = [axis(0), axis(1), axis(2)];
        let position = |d: usize, x: f64| axes[d].iter().position(|a| (a - x).abs() < SNAP);
        let mut grid = HashMap::new();
        for (i, p) in pts.iter().enumerate() {
            if let (Some(a), Some(b), Some(c)) = (
                position(0, p.0[0]),
                position(1, p.0[1]),
                position(2, p.0[2]),
            ) {
                grid.insert([a, b, c], i);
            }
        }
        let lo = [0, 1, 2].map(|d| axes[d][0]);
        let hi = [0, 1, 2].map(|d| axes[d][axes[d].len() - 1]);
        Points {
            pts,
            axes,
            grid,
            lo,
            hi,
        }
    }

    /// Trilinear interpolation where the 8 grid corners around `x` are measured.
    fn trilinear(&self, x: [f64; 3]) -> Option<f64> {
        let mut bracket = [(0usize, 0usize, 0.0f64); 3];
        for d in 0..3 {
            let axis = &self.axes[d];
            let hi = axis
                .partition_point(|&a| a < x[d] - SNAP)
                .min(axis.len() - 1);
            let lo = if (axis[hi] - x[d]).abs() < SNAP || hi == 0 {
                hi
            } else {
                hi - 1
            };
            let f = if hi == lo {
                0.0
            } else {
                (x[d] - axis[lo]) / (axis[hi] - axis[lo])
            };
            bracket[d] = (lo, hi, f);
        }
        let mut sum = 0.0;
        for corner in 0..8 {
            let pick = |d: usize| {
                let (lo, hi, f) = bracket[d];
                if corner >> d & 1 == 1 {
                    (hi, f)
                } else {
                    (lo, 1.0 - f)
                }
            };
            let (a, wa) = pick(0);
            let (b, wb) = pick(1);
            let (c, wc) = pick(2);
            let w = wa * wb * wc;
            if w == 0.0 {
                continue;
            }
            sum += w * self.pts[*self.grid.get(&[a, b, c])?].1;
        }
        Some(sum)
    }

    /// Inverse-squared-distance weighting of the nearest measured shapes.
    fn nearest(&self, x: [f64; 3]) -> f64 {
        let mut by_distance: Vec<(f64, f64)> = self
            .pts
            .iter()
            .map(|(p, e)| ((0..3).map(|d| (p[d] - x[d]).powi(2)).sum::<f64>(), *e))
            .collect();
        by_distance.sort_by(|a, b| a.0.total_cmp(&b.0));
        if by_distance[0].0 < SNAP {
            return by_distance[0].1;
        }
        let near = &by_distance[..by_distance.len().min(NEIGHBOURS)];
        let weight: f64 = near.iter().map(|(d, _)| 1.0 / d).sum();
        near.iter().map(|(d, e)| e / d).sum::<f64>() / weight
    }

    fn inside(&self, x: [f64; 3]) -> bool {
        (0..3).all(|d| x[d] >= self.lo[d] - SNAP && x[d] <= self.hi[d] + SNAP)
    }

    fn efficiency(&self, x: [f64; 3]) -> f64 {
        self.trilinear(x).unwrap_or_else(|| self.nearest(x))
    }
}

/// A looked-up shape: its layout and m, n, k.
type ShapeKey = (Option<GemmLayout>, [u64; 3]);

/// Measured GEMM efficiency per layout, from one dtype's GEMM records.
#[derive(Debug)]
pub struct GemmTable {
    by_layout: BTreeMap<GemmLayout, Points>,
    pooled: Points,
    /// Shapes measured, after nodes and GPUs were aggregated.
    pub shapes: usize,
    /// Layouts measured on their own.
    pub layouts: Vec<GemmLayout>,
    /// Each measured layout's efficiency against every layout's at its own shapes (median).
    ratio: BTreeMap<GemmLayout, f64>,
    cache: Mutex<HashMap<ShapeKey, Lookup>>,
}

impl GemmTable {
    /// The table of `records` (GEMMs of one dtype, already filtered), efficiency against
    /// `peak_flops`. A shape measured on several GPUs or nodes takes `aggregate` of them (a
    /// node is as fast as its slowest GPU, the fleet as `--aggregate` says); a record without
    /// a layout counts for every layout. `None` without a usable point.
    pub fn new(records: &[&Record], peak_flops: f64, aggregate: Aggregate) -> Option<GemmTable> {
        let mut by_shape: BTreeMap<(Option<GemmLayout>, [u64; 3]), Vec<f64>> = BTreeMap::new();
        for r in records {
            let (Some(g), Some(f)) = (r.gemm, r.flops) else {
                continue;
            };
            if !(f.is_finite() && f > 0.0) {
                continue;
            }
            by_shape
                .entry((r.detail.layout, [g.m, g.n, g.k]))
                .or_default()
                .push(f / peak_flops);
        }
        if by_shape.is_empty() {
            return None;
        }
        let log = |s: [u64; 3]| s.map(|v| (v as f64).log2());
        let mut layouts: BTreeMap<GemmLayout, Vec<([f64; 3], f64)>> = BTreeMap::new();
        let mut pooled: BTreeMap<[u64; 3], Vec<f64>> = BTreeMap::new();
        for ((layout, shape), effs) in &by_shape {
            let e = aggregate.rate(effs);
            if let Some(l) = layout {
                layouts.entry(*l).or_default().push((log(*shape), e));
            }
            pooled.entry(*shape).or_default().push(e);
        }
        let pooled: Vec<([f64; 3], f64)> = pooled
            .iter()
            .map(|(s, effs)| (log(*s), effs.iter().sum::<f64>() / effs.len() as f64))
            .collect();
        let pooled = Points::new(pooled);
        let ratio = layouts
            .iter()
            .map(|(l, pts)| {
                let ratios = pts.iter().map(|(x, e)| e / pooled.efficiency(*x)).collect();
                (*l, crate::stats::median(ratios))
            })
            .collect();
        Some(GemmTable {
            shapes: pooled.pts.len(),
            ratio,
            layouts: layouts.keys().copied().collect(),
            by_layout: layouts
                .into_iter()
                .map(|(l, pts)| (l, Points::new(pts)))
                .collect(),
            pooled,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The measured efficiency of an m x n x k GEMM in `layout` (BLAS terms, as the records
    /// are), or where it lies outside what was measured.
    pub fn lookup(&self, layout: GemmLayout, m: f64, n: f64, k: f64) -> Lookup {
        let shape = [m, n, k].map(|v| v.max(1.0).round() as u64);
        let key = (Some(layout), shape);
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).copied()) {
            return hit;
        }
        let x = shape.map(|v| (v as f64).log2());
        let own = self.by_layout.get(&layout);
        // A layout's own points where they surround the shape; else every layout's, at the
        // layout's measured ratio to them (a sweep often times the gradients' layouts at a
        // few shapes only).
        let (points, ratio) = match own {
            Some(p) if p.inside(x) => (p, 1.0),
            Some(_) => (
                &self.pooled,
                self.ratio.get(&layout).copied().unwrap_or(1.0),
            ),
            None => (&self.pooled, 1.0),
        };
        let found = if points.inside(x) {
            Lookup::Inside(points.efficiency(x) * ratio)
        } else {
            let clamped = [0, 1, 2].map(|d| x[d].clamp(points.lo[d], points.hi[d]));
            Lookup::Outside {
                efficiency: points.efficiency(clamped) * ratio,
                nearest: clamped.map(f64::exp2),
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, found);
        }
        found
    }

    /// Whether `layout` was measured on its own (else every layout's points answer for it).
    pub fn has_layout(&self, layout: GemmLayout) -> bool {
        self.by_layout.contains_key(&layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{Backend, Clock, Dtype, Gemm, Group, Scope, Timing};

    fn rec(m: u64, n: u64, k: u64, layout: Option<GemmLayout>, eff: f64) -> Record {
        let shape = Gemm { m, n, k };
        let group = Group {
            node: Some("n".into()),
            gpus: vec![0],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        let t = shape.flop() / (eff * 1e15);
        let mut r = Record::gemm(
            Backend::Cuda,
            group,
            shape,
            Dtype::Bf16,
            Timing::without_spread(t, None, Clock::Imported),
        );
        r.detail.layout = layout;
        r
    }

    /// A 2 x 2 x 2 grid of shapes 1024 and 4096 with efficiency 0.1 x (1 + i + j + k) by
    /// corner: halfway in log2 (2048 in every dimension) is the mean of the corners, 0.25;
    /// a shape on a face interpolates along the other two dimensions only.
    #[test]
    fn a_grid_interpolates_trilinearly_in_log_space() {
        let mut recs = Vec::new();
        for (i, m) in [1024, 4096].iter().enumerate() {
            for (j, n) in [1024, 4096].iter().enumerate() {
                for (l, k) in [1024, 4096].iter().enumerate() {
                    recs.push(rec(*m, *n, *k, None, 0.1 * (1 + i + j + l) as f64));
                }
            }
        }
        let refs: Vec<&Record> = recs.iter().collect();
        let t = GemmTable::new(&refs, 1e15, Aggregate::Slowest).unwrap();
        let at = |m, n, k| match t.lookup(GemmLayout::Tn, m, n, k) {
            Lookup::Inside(e) => e,
            other => panic!("{other:?}"),
        };
        assert!((at(2048.0, 2048.0, 2048.0) - 0.25).abs() < 1e-12);
        assert!((at(4096.0, 4096.0, 4096.0) - 0.4).abs() < 1e-12);
        // m = 1024 face: 0.1 x (1 + 0.5 + 0.5).
        assert!((at(1024.0, 2048.0, 2048.0) - 0.2).abs() < 1e-12);
        // Outside: the nearest corner's figure, and which corner.
        assert_eq!(
            t.lookup(GemmLayout::Tn, 8192.0, 8192.0, 8192.0),
            Lookup::Outside {
                efficiency: 0.4,
                nearest: [4096.0, 4096.0, 4096.0]
            }
        );
    }

    /// Off the grid, the nearest shapes answer by inverse squared distance: between two
    /// measured shapes one octave apart in m, halfway gets their mean.
    #[test]
    fn scattered_shapes_weigh_by_distance_and_layouts_are_kept_apart() {
        let recs = [
            rec(1024, 4096, 4096, Some(GemmLayout::Tn), 0.5),
            rec(2048, 4096, 4096, Some(GemmLayout::Tn), 0.7),
            rec(1024, 8192, 4096, Some(GemmLayout::Tn), 0.6),
            rec(1024, 4096, 4096, Some(GemmLayout::Nt), 0.3),
            rec(2048, 8192, 4096, Some(GemmLayout::Nt), 0.3),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let t = GemmTable::new(&refs, 1e15, Aggregate::Slowest).unwrap();
        assert_eq!(t.layouts, [GemmLayout::Nt, GemmLayout::Tn]);
        let mid = 2f64.powf(10.5);
        match t.lookup(GemmLayout::Tn, mid, 4096.0, 4096.0) {
            Lookup::Inside(e) => assert!((e - (0.5 + 0.7) / 2.0).abs() < 0.06, "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            t.lookup(GemmLayout::Nt, 1024.0, 4096.0, 4096.0),
            Lookup::Inside(0.3)
        );
        // nn was not measured: every layout's points answer.
        assert!(!t.has_layout(GemmLayout::Nn));
        match t.lookup(GemmLayout::Nn, 1024.0, 4096.0, 4096.0) {
            Lookup::Inside(e) => assert!((e - 0.4).abs() < 1e-12, "{e}"),
            other => panic!("{other:?}"),
        }
    }

    /// The forward measured on a grid at 0.5, the weight gradient at one corner only, at 0.4:
    /// every layout's mean there is 0.45, so the weight gradient runs at 0.4 / 0.45 of it, and
    /// at 2048^3 (the grid's middle: seven corners at 0.5, one at 0.45) at 0.49375 x 0.889.
    #[test]
    fn a_layout_measured_at_few_shapes_keeps_its_ratio_elsewhere() {
        let mut recs = Vec::new();
        for m in [1024, 4096] {
            for n in [1024, 4096] {
                for k in [1024, 4096] {
                    recs.push(rec(m, n, k, Some(GemmLayout::Tn), 0.5));
                }
            }
        }
        recs.push(rec(1024, 1024, 1024, Some(GemmLayout::Nt), 0.4));
        let refs: Vec<&Record> = recs.iter().collect();
        let t = GemmTable::new(&refs, 1e15, Aggregate::Slowest).unwrap();
        let expected = (7.0 * 0.5 + 0.45) / 8.0 * (0.4 / 0.45);
        match t.lookup(GemmLayout::Nt, 2048.0, 2048.0, 2048.0) {
            Lookup::Inside(e) => assert!((e - expected).abs() < 1e-12, "{e} vs {expected}"),
            other => panic!("{other:?}"),
        }
        match t.lookup(GemmLayout::Nt, 1024.0, 1024.0, 1024.0) {
            Lookup::Inside(e) => assert!((e - 0.4).abs() < 1e-12, "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_slowest_gpu_sets_a_shape() {
        let mut slow = rec(1024, 1024, 1024, None, 0.5);
        slow.group.gpus = vec![1];
        let recs = [rec(1024, 1024, 1024, None, 0.8), slow];
        let refs: Vec<&Record> = recs.iter().collect();
        let at = |agg| match GemmTable::new(&refs, 1e15, agg).unwrap().lookup(
            GemmLayout::Tn,
            1024.0,
            1024.0,
            1024.0,
        ) {
            Lookup::Inside(e) => e,
            other => panic!("{other:?}"),
        };
        assert!((at(Aggregate::Slowest) - 0.5).abs() < 1e-12);
        assert!((at(Aggregate::Median) - 0.65).abs() < 1e-12);
    }
}
