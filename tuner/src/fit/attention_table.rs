//! Measured attention-kernel throughput by sequence length and head width, for pricing the
//! fused attention the cost model prices ([`crate::cost::compute::ComputeModel::attention_s`]).
//!
//! Rates are in FlashAttention's FLOP convention ([`record::AttentionShape::flop`]), which is
//! the cost model's: a causal forward over t tokens of s-token sequences executes 2 t s q FLOPs.
//! Between measured lengths the rate is interpolated linearly in log2(seq); past them the
//! caller anchors its own curve to the edge, as for GEMMs. A head width not measured takes the
//! nearest one measured, and says so.

use std::collections::BTreeMap;

use record::{AttentionPass, Kind, Record};

use super::fleet::Aggregate;

/// Forward and backward rates at one sequence length, FLOP/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Forward.
    pub fwd: f64,
    /// Backward (2.5x the forward's FLOPs).
    pub bwd: f64,
}

/// What the table says about one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionLookup {
    /// The rates at the call's length, or at the nearest measured one.
    pub rates: Rates,
    /// The measured length the rates are at, when the call's length lies outside the sweep.
    pub outside_at: Option<f64>,
    /// The measured head width used, when the call's was not measured.
    pub other_head_dim: Option<u64>,
}

/// Measured attention rates for one mask (causal where measured, else full).
#[derive(Debug, Clone)]
pub struct AttentionTable {
    /// Head width -> (log2 seq, rates), sorted by length.
    by_head_dim: BTreeMap<u64, Vec<(f64, Rates)>>,
    /// Whether the points are causal (the mask training runs); full-mask points serve only
    /// when no causal one was measured, and then price causal calls as extrapolated.
    pub causal: bool,
    /// Points refused as faster than the datasheet allows, named.
    pub refused: Vec<String>,
}

/// The rates of one point from what was measured of it: forward, backward, and forward plus
/// backward timed together (3.5x the forward's FLOPs). A backward timed only with the forward
/// is their difference; a pass not measured runs at the rate of what was.
fn rates(fwd: Option<f64>, bwd: Option<f64>, both: Option<f64>) -> Option<Rates> {
    let derive = |known: f64, known_share: f64, both: f64, other_share: f64| {
        let other_time = 3.5 / both - known_share / known;
        (other_time > 0.0).then(|| other_share / other_time)
    };
    let r = match (fwd, bwd, both) {
        (Some(f), Some(b), _) => Rates { fwd: f, bwd: b },
        (Some(f), None, Some(fb)) => Rates {
            fwd: f,
            bwd: derive(f, 1.0, fb, 2.5).unwrap_or(fb),
        },
        (None, Some(b), Some(fb)) => Rates {
            fwd: derive(b, 2.5, fb, 1.0).unwrap_or(fb),
            bwd: b,
        },
        (Some(f), None, None) => Rates { fwd: f, bwd: f },
        (None, Some(b), None) => Rates { fwd: b, bwd: b },
        (None, None, Some(fb)) => Rates { fwd: fb, bwd: fb },
        (None, None, None) => return None,
    };
    Some(r)
}

impl AttentionTable {
    /// The table of the 16-bit attention records among `records`, rates against the bf16
    /// `peak_flops` (a point past it is refused and named). `None` without one.
    pub fn new(
        records: &[Record],
        peak_flops: f64,
        aggregate: Aggregate,
    ) -> Option<AttentionTable> {
        let sixteen = |r: &&Record| matches!(r.dtype, record::Dtype::Bf16 | record::Dtype::Fp16);
        let attention: Vec<&Record> = records
            .iter()
            .filter(|r| r.kind == Kind::Attention)
            .filter(sixteen)
            .collect();
        let causal = attention
            .iter()
            .any(|r| r.detail.attention.is_some_and(|a| a.causal));
        // (head_dim, seq, pass) -> batch x heads -> (node, GPU) -> repeats.
        type Gpus = BTreeMap<(String, u32), Vec<f64>>;
        let mut cells: BTreeMap<(u64, u64, AttentionPass), BTreeMap<u64, Gpus>> = BTreeMap::new();
        let mut refused = Vec::new();
        for r in &attention {
            let (Some(a), Some(f)) = (r.detail.attention, r.flops) else {
                continue;
            };
            if a.causal != causal || !(f.is_finite() && f > 0.0) {
                continue;
            }
            let node = r.group.node.clone().unwrap_or_default();
            let gpu = r.group.gpus.first().copied().unwrap_or(0);
            if f > peak_flops {
                refused.push(format!(
                    "attention {} x {} tokens, {} heads of {}, {} on {node} GPU {gpu}: {:.1} TFLOP/s, over the datasheet's {:.1} (a wrong unit, or another GPU)",
                    a.batch, a.seq, a.heads, a.head_dim, a.pass, f / 1e12, peak_flops / 1e12
                ));
                continue;
            }
            cells
                .entry((a.head_dim, a.seq, a.pass))
                .or_default()
                .entry(a.batch * a.heads)
                .or_default()
                .entry((node, gpu))
                .or_default()
                .push(f);
        }
        // A GPU's repeats by their median, a node by its slowest GPU, the fleet by
        // `aggregate`; several batch and head counts at one length by their mean.
        let rate_of = |gpus: &Gpus| {
            let mut nodes: BTreeMap<&str, f64> = BTreeMap::new();
            for ((node, _), v) in gpus {
                let r = crate::stats::median(v.clone());
                let slowest = nodes.entry(node).or_insert(r);
                *slowest = slowest.min(r);
            }
            aggregate.rate(&nodes.into_values().collect::<Vec<_>>())
        };
        let cells: BTreeMap<(u64, u64, AttentionPass), Vec<f64>> = cells
            .into_iter()
            .map(|(k, calls)| (k, calls.values().map(rate_of).collect()))
            .collect();
        let mut by_point: BTreeMap<(u64, u64), [Option<f64>; 3]> = BTreeMap::new();
        for ((d, s, pass), per_call) in &cells {
            let mean = per_call.iter().sum::<f64>() / per_call.len() as f64;
            let slot = match pass {
                AttentionPass::Fwd => 0,
                AttentionPass::Bwd => 1,
                AttentionPass::FwdBwd => 2,
            };
            by_point.entry((*d, *s)).or_default()[slot] = Some(mean);
        }
        let mut by_head_dim: BTreeMap<u64, Vec<(f64, Rates)>> = BTreeMap::new();
        for ((d, s), [f, b, fb]) in by_point {
            if let Some(r) = rates(f, b, fb) {
                by_head_dim
                    .entry(d)
                    .or_default()
                    .push(((s as f64).log2(), r));
            }
        }
        (!by_head_dim.is_empty()).then_some(AttentionTable {
            by_head_dim,
            causal,
            refused,
        })
    }

    /// What the table holds, for reports.
    pub fn describe(&self) -> String {
        let widths: Vec<String> = self
            .by_head_dim
            .iter()
            .map(|(d, curve)| {
                let (lo, hi) = (curve[0].0.exp2(), curve[curve.len() - 1].0.exp2());
                format!("head dim {d} at {lo:.0}-{hi:.0} tokens")
            })
            .collect();
        format!(
            "{} mask, {}",
            if self.causal {
                "causal"
            } else {
                "full (not causal)"
            },
            widths.join(", ")
        )
    }

    /// The rates of a call over `seq`-token sequences with heads `head_dim` wide.
    pub fn lookup(&self, seq: f64, head_dim: f64) -> AttentionLookup {
        let (&d, curve) = self
            .by_head_dim
            .iter()
            .min_by(|a, b| {
                let dist = |d: u64| ((d as f64).log2() - head_dim.log2()).abs();
                dist(*a.0).total_cmp(&dist(*b.0))
            })
            .expect("a table has a point");
        let x = seq.max(1.0).log2();
        let (first, last) = (curve[0], curve[curve.len() - 1]);
        let (rates, outside_at) = if x < first.0 - 1e-9 {
            (first.1, Some(first.0.exp2()))
        } else if x > last.0 + 1e-9 {
            (last.1, Some(last.0.exp2()))
        } else {
            let i = curve.partition_point(|p| p.0 < x).min(curve.len() - 1);
            let (hi, lo) = (curve[i], curve[i.saturating_sub(1)]);
            let f = if hi.0 - lo.0 > 0.0 {
                (x - lo.0) / (hi.0 - lo.0)
            } else {
                0.0
            };
            let mix = |a: f64, b: f64| a + (b - a) * f;
            (
                Rates {
                    fwd: mix(lo.1.fwd, hi.1.fwd),
                    bwd: mix(lo.1.bwd, hi.1.bwd),
                },
                None,
            )
        };
        AttentionLookup {
            rates,
            outside_at,
            other_head_dim: ((d as f64 - head_dim).abs() > 0.5).then_some(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{AttentionShape, Backend, Clock, Dtype, Group, Scope, Timing};

    fn rec(seq: u64, pass: AttentionPass, tflops: f64) -> Record {
        let shape = AttentionShape {
            batch: 2,
            seq,
            heads: 16,
            head_dim: 128,
            causal: true,
            pass,
        };
        let group = Group {
            node: None,
            gpus: vec![],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        let t = shape.flop() / (tflops * 1e12);
        Record::attention(
            Backend::Cuda,
            group,
            shape,
            Dtype::Bf16,
            Timing::without_spread(t, None, Clock::Imported),
        )
    }

    /// Forward at 200 and 300 TFLOP/s at 2k and 8k tokens: 4k (halfway in log2) runs at 250.
    /// The backward timed with the forward at 8k, 3.5 F at 280 TFLOP/s with the forward at
    /// 300: the backward takes 3.5/280 - 1/300 of F per TFLOP/s, 2.5 / that = 272.7.
    #[test]
    fn lengths_interpolate_and_the_backward_is_the_difference() {
        let recs = [
            rec(2048, AttentionPass::Fwd, 200.0),
            rec(8192, AttentionPass::Fwd, 300.0),
            rec(2048, AttentionPass::FwdBwd, 200.0),
            rec(8192, AttentionPass::FwdBwd, 280.0),
        ];
        let t = AttentionTable::new(&recs, 989e12, Aggregate::Slowest).unwrap();
        let mid = t.lookup(4096.0, 128.0);
        assert!((mid.rates.fwd / 250e12 - 1.0).abs() < 1e-9);
        assert_eq!((mid.outside_at, mid.other_head_dim), (None, None));
        let at8k = t.lookup(8192.0, 128.0);
        let bwd = 2.5 / (3.5 / 280.0 - 1.0 / 300.0) * 1e12;
        assert!(
            (at8k.rates.bwd / bwd - 1.0).abs() < 1e-9,
            "{}",
            at8k.rates.bwd
        );
        assert!((bwd / 272.7e12 - 1.0).abs() < 1e-3);
        let long = t.lookup(65536.0, 64.0);
        assert_eq!(long.outside_at, Some(8192.0));
        assert_eq!(long.other_head_dim, Some(128));
        assert_eq!(long.rates, at8k.rates);
    }
}
