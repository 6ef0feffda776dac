//! Measured GEMM efficiency by shape and layout, for pricing every GEMM the cost model prices.
//!
//! A sweep measures some shapes; a layer runs others. Between measured shapes the efficiency
//! is interpolated in log2(m, n, k) space: trilinearly where the sweep is a grid around the
//! shape (the 8 corners measured), else from the nearest measured shapes weighted by inverse
//! squared distance, where one lies within an octave. Other shapes are [`Lookup::Outside`]:
//! the caller prices them from the catalog's shape curve anchored to the measured efficiency
//! at the nearest measured shape, and says so. Each layout (tn forward, nn input gradient, nt
//! weight gradient) is read from its own points where they surround the shape, else from the
//! other layouts' at its measured ratio to them.

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

/// How far (in octaves, the Euclidean distance in log2(m, n, k)) the nearest measured shape
/// may lie for an off-grid shape to count as measured.
const NEAR: f64 = 1.0;

/// Most points the table's leave-one-shape-out error is computed over.
const SPREAD_SAMPLE: usize = 2000;

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

    /// Inverse-squared-distance weighting of the nearest measured shapes (leaving out the
    /// point at `skip`, for the table's own error).
    fn nearest(&self, x: [f64; 3], skip: Option<usize>) -> f64 {
        let mut by_distance: Vec<(f64, f64)> = self
            .pts
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, (p, e))| (distance2(*p, x), *e))
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

    /// The measured point closest to `x`.
    fn closest(&self, x: [f64; 3]) -> ([f64; 3], f64) {
        *self
            .pts
            .iter()
            .min_by(|a, b| distance2(a.0, x).total_cmp(&distance2(b.0, x)))
            .expect("a table has a point")
    }

    /// The efficiency at `x` if the measurements describe it: on the grid, or within
    /// [`NEAR`] of a measured shape inside the measured box.
    fn measured(&self, x: [f64; 3]) -> Option<f64> {
        if !self.inside(x) {
            return None;
        }
        self.trilinear(x).or_else(|| {
            (distance2(self.closest(x).0, x) <= NEAR * NEAR).then(|| self.nearest(x, None))
        })
    }

    /// What the points say of `x`: measured, or the efficiency to anchor the catalog's
    /// curve at, and where: the grid at the box's nearest face where it covers it, else the
    /// closest measured shape.
    fn answer(&self, x: [f64; 3]) -> Lookup {
        if let Some(e) = self.measured(x) {
            return Lookup::Inside(e);
        }
        let clamped = [0, 1, 2].map(|d| x[d].clamp(self.lo[d], self.hi[d]));
        let (at, efficiency) = match self.trilinear(clamped) {
            Some(e) => (clamped, e),
            None => self.closest(x),
        };
        Lookup::Outside {
            efficiency,
            nearest: at.map(f64::exp2),
        }
    }

    /// Root mean square of the relative error with which the other points predict each one
    /// (on a sample of at most [`SPREAD_SAMPLE`]), each weighted by its FLOPs: how well the
    /// table interpolates the GEMMs that fill a step, not the launch-bound small ones whose
    /// efficiency changes fivefold an octave apart.
    fn spread(&self) -> f64 {
        if self.pts.len() < 2 {
            return 0.0;
        }
        let step = self.pts.len().div_ceil(SPREAD_SAMPLE);
        let (mut sq, mut weight) = (0.0, 0.0);
        for i in (0..self.pts.len()).step_by(step) {
            let (x, e) = self.pts[i];
            let flop = (x[0] + x[1] + x[2]).exp2();
            sq += flop * (self.nearest(x, Some(i)) / e - 1.0).powi(2);
            weight += flop;
        }
        (sq / weight).sqrt()
    }
}

fn distance2(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|d| (a[d] - b[d]).powi(2)).sum()
}

/// A looked-up shape: its layout and m, n, k.
type ShapeKey = (GemmLayout, [u64; 3]);

/// One layout's points, and the other layouts' with its ratio to them, for shapes its own
/// points do not surround.
#[derive(Debug)]
struct Layout {
    own: Points,
    others: Option<(Points, f64)>,
}

/// Measured GEMM efficiency per layout, from one dtype's GEMM records.
#[derive(Debug)]
pub struct GemmTable {
    by_layout: BTreeMap<GemmLayout, Layout>,
    pooled: Points,
    /// The table's leave-one-shape-out relative error, the figures' uncertainty.
    pub rms_rel_error: f64,
    /// Shapes refused as faster than the datasheet allows, named.
    pub refused: Vec<String>,
    cache: Mutex<HashMap<ShapeKey, Lookup>>,
}

/// Points of (layout, shape) -> efficiency.
type ByShape = BTreeMap<(Option<GemmLayout>, [u64; 3]), f64>;

/// Efficiencies by layout and shape over the fleet: repeats of one GPU by their median, a
/// node by its slowest GPU, the fleet by `aggregate` over nodes. Points faster than the
/// datasheet peak are refused and named.
fn aggregate_shapes(
    records: &[&Record],
    peak: f64,
    aggregate: Aggregate,
) -> (ByShape, Vec<String>) {
    type Repeats = BTreeMap<(String, u32), Vec<f64>>;
    let mut cells: BTreeMap<(Option<GemmLayout>, [u64; 3]), Repeats> = BTreeMap::new();
    let mut refused = Vec::new();
    for r in records {
        let (Some(g), Some(f)) = (r.gemm, r.flops) else {
            continue;
        };
        if !(f.is_finite() && f > 0.0) {
            continue;
        }
        let node = r.group.node.clone().unwrap_or_default();
        let gpu = r.group.gpus.first().copied().unwrap_or(0);
        if f > peak {
            refused.push(format!(
                "GEMM {}x{}x{} {} on {node} GPU {gpu}: {:.1} TFLOP/s, over the datasheet's {:.1} \
                 (a wrong unit, or another GPU)",
                g.m,
                g.n,
                g.k,
                r.detail.layout.map_or("", |l| l.as_str()),
                f / 1e12,
                peak / 1e12
            ));
            continue;
        }
        cells
            .entry((r.detail.layout, [g.m, g.n, g.k]))
            .or_default()
            .entry((node, gpu))
            .or_default()
            .push(f / peak);
    }
    let shapes = cells
        .into_iter()
        .map(|(key, repeats)| {
            let mut nodes: BTreeMap<String, f64> = BTreeMap::new();
            for ((node, _), v) in repeats {
                let e = crate::stats::median(v);
                let slowest = nodes.entry(node).or_insert(e);
                *slowest = slowest.min(e);
            }
            (
                key,
                aggregate.rate(&nodes.into_values().collect::<Vec<_>>()),
            )
        })
        .collect();
    (shapes, refused)
}

impl GemmTable {
    /// The table of `records` (GEMMs of one dtype, already filtered), efficiency against
    /// `peak_flops`; a record without a layout counts for every layout. `None` without a
    /// usable point.
    pub fn new(records: &[&Record], peak_flops: f64, aggregate: Aggregate) -> Option<GemmTable> {
        let (by_shape, refused) = aggregate_shapes(records, peak_flops, aggregate);
        if by_shape.is_empty() {
            return None;
        }
        let log = |s: [u64; 3]| s.map(|v| (v as f64).log2());
        let mut layouts: BTreeMap<GemmLayout, Vec<([f64; 3], f64)>> = BTreeMap::new();
        let mut pooled: BTreeMap<[u64; 3], Vec<f64>> = BTreeMap::new();
        for ((layout, shape), e) in &by_shape {
            if let Some(l) = layout {
                layouts.entry(*l).or_default().push((log(*shape), *e));
            }
            pooled.entry(*shape).or_default().push(*e);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let pooled_points = Points::new(pooled.iter().map(|(s, e)| (log(*s), mean(e))).collect());
        let by_layout = layouts
            .keys()
            .map(|l| {
                let own = Points::new(layouts[l].clone());
                // The other layouts (and records of no layout) at each shape, without this one.
                let mut rest: BTreeMap<[u64; 3], Vec<f64>> = BTreeMap::new();
                for ((layout, shape), e) in &by_shape {
                    if *layout != Some(*l) {
                        rest.entry(*shape).or_default().push(*e);
                    }
                }
                let others = (!rest.is_empty()).then(|| {
                    let points =
                        Points::new(rest.iter().map(|(s, e)| (log(*s), mean(e))).collect());
                    let ratios: Vec<f64> = own
                        .pts
                        .iter()
                        .filter_map(|(x, e)| points.measured(*x).map(|o| e / o))
                        .collect();
                    let ratio = if ratios.is_empty() {
                        1.0
                    } else {
                        crate::stats::median(ratios)
                    };
                    (points, ratio)
                });
                (*l, Layout { own, others })
            })
            .collect();
        Some(GemmTable {
            rms_rel_error: pooled_points.spread(),
            by_layout,
            pooled: pooled_points,
            refused,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// What the table holds, for reports.
    pub fn describe(&self) -> String {
        let layouts: Vec<String> = self
            .by_layout
            .iter()
            .map(|(l, p)| format!("{l} {}", p.own.pts.len()))
            .collect();
        format!(
            "{} shapes measured{}, which price every GEMM (leave-one-shape-out error {:.1}%)",
            self.pooled.pts.len(),
            if layouts.is_empty() {
                String::new()
            } else {
                format!(" ({})", layouts.join(", "))
            },
            self.rms_rel_error * 100.0
        )
    }

    /// The measured efficiency of an m x n x k GEMM in `layout` (BLAS terms, as the records
    /// are), or where it lies outside what was measured.
    pub fn lookup(&self, layout: GemmLayout, m: f64, n: f64, k: f64) -> Lookup {
        let shape = [m, n, k].map(|v| v.max(1.0).round() as u64);
        let key = (layout, shape);
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).copied()) {
            return hit;
        }
        let x = shape.map(|v| (v as f64).log2());
        let scaled = |answer: Lookup, ratio: f64| match answer {
            Lookup::Inside(e) => Lookup::Inside(e * ratio),
            Lookup::Outside {
                efficiency,
                nearest,
            } => Lookup::Outside {
                efficiency: efficiency * ratio,
                nearest,
            },
        };
        let found = match self.by_layout.get(&layout) {
            Some(l) => match (l.own.measured(x), &l.others) {
                (Some(e), _) => Lookup::Inside(e),
                // A sweep often times the gradients' layouts at a few shapes only.
                (None, Some((others, ratio))) => scaled(others.answer(x), *ratio),
                (None, None) => l.own.answer(x),
            },
            None => self.pooled.answer(x),
        };
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, found);
        }
        found
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
        match t.lookup(GemmLayout::Nn, 1024.0, 4096.0, 4096.0) {
            Lookup::Inside(e) => assert!((e - 0.4).abs() < 1e-12, "{e}"),
            other => panic!("{other:?}"),
        }
    }

    /// The forward measured on a grid at 0.5, the weight gradient at one corner only, at 0.4:
    /// the weight gradient runs at 0.8 of the other layouts (0.4 / 0.5, itself left out), so
    /// at 2048^3, the grid's middle, at 0.5 x 0.8.
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
        match t.lookup(GemmLayout::Nt, 2048.0, 2048.0, 2048.0) {
            Lookup::Inside(e) => assert!((e - 0.4).abs() < 1e-12, "{e}"),
            other => panic!("{other:?}"),
        }
        match t.lookup(GemmLayout::Nt, 1024.0, 1024.0, 1024.0) {
            Lookup::Inside(e) => assert!((e - 0.4).abs() < 1e-12, "{e}"),
            other => panic!("{other:?}"),
        }
    }

    /// Two shapes, 1024^3 at 0.5 and 8192^3 at 0.8: 8192 x 1024 x 1024 lies inside their box
    /// but three octaves from the one and 4.2 from the other, off any grid: not measured, and
    /// anchored at the closer, 1024^3.
    #[test]
    fn a_shape_far_from_every_measurement_is_not_called_measured() {
        let recs = [
            rec(1024, 1024, 1024, Some(GemmLayout::Tn), 0.5),
            rec(8192, 8192, 8192, Some(GemmLayout::Tn), 0.8),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let t = GemmTable::new(&refs, 1e15, Aggregate::Slowest).unwrap();
        match t.lookup(GemmLayout::Tn, 8192.0, 1024.0, 1024.0) {
            Lookup::Outside {
                efficiency,
                nearest,
            } => {
                assert!((efficiency - 0.5).abs() < 1e-12, "{efficiency}");
                assert_eq!(nearest, [1024.0; 3]);
            }
            other => panic!("{other:?}"),
        }
        // Within an octave of a measured shape it is measured.
        assert!(matches!(
            t.lookup(GemmLayout::Tn, 1448.0, 1024.0, 1024.0),
            Lookup::Inside(_)
        ));
    }

    /// A point faster than the datasheet is a wrong unit or another GPU: refused and named,
    /// the rest kept.
    #[test]
    fn a_gemm_faster_than_the_datasheet_is_refused() {
        let recs = [
            rec(1024, 1024, 1024, Some(GemmLayout::Tn), 3.0),
            rec(2048, 2048, 2048, Some(GemmLayout::Tn), 0.7),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let t = GemmTable::new(&refs, 1e15, Aggregate::Slowest).unwrap();
        assert_eq!(t.refused.len(), 1);
        assert!(
            t.refused[0].starts_with(
                "GEMM 1024x1024x1024 tn on n GPU 0: 3000.0 TFLOP/s, over the datasheet's 1000.0"
            ),
            "{:?}",
            t.refused
        );
        assert_eq!(
            t.lookup(GemmLayout::Tn, 2048.0, 2048.0, 2048.0),
            Lookup::Inside(0.7)
        );
    }

    /// A node is as fast as its slowest GPU, its repeats by their median; the fleet takes
    /// --aggregate over nodes.
    #[test]
    fn the_slowest_gpu_sets_a_node_and_the_aggregate_the_fleet() {
        let on = |node: &str, gpu: u32, eff: f64| {
            let mut r = rec(1024, 1024, 1024, None, eff);
            r.group.node = Some(node.into());
            r.group.gpus = vec![gpu];
            r
        };
        let recs = [
            on("a", 0, 0.8),
            on("a", 1, 0.5),
            on("b", 0, 0.8),
            on("b", 0, 0.78),
            on("b", 0, 0.2),
        ];
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
        // Node a: its slower GPU, 0.5. Node b: the median of its GPU's repeats, 0.78.
        assert!((at(Aggregate::Slowest) - 0.5).abs() < 1e-12);
        assert!((at(Aggregate::Median) - 0.64).abs() < 1e-12);
    }
}
