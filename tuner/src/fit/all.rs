//! [`fit_all`]: every curve the records allow, step by step: the records grouped by what they
//! measured, a curve per node, the nodes behind the fleet, the nodes left out, and the fleet's
//! curves and tables over the nodes kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use record::{busbw_factor, Dtype, Kind, Record, Scope};

use super::attention_table::AttentionTable;
use super::fleet::{self, Aggregate, Straggler};
use super::gemm::{self, GemmCurve, GemmPoint};
use super::gemm_table::GemmTable;
use super::size_table::SizeTable;
use super::{
    alpha_beta, members_per_node, pairs, FitOptions, Fits, FleetCurve, NodeCurve, NodeGemm,
};

/// Smallest GEMM dimension fitted.
const MIN_GEMM_DIM: u64 = 1024;
/// Shortest GEMM fitted, seconds at peak.
const MIN_GEMM_S: f64 = 50e-6;

/// Sizes at which node curves are aggregated into the fleet curve.
const FLEET_POINTS: u32 = 40;

/// A sweep's key: node, collective, scope, ranks, members per node, NVLink domains.
type SweepKey = (String, Kind, Scope, u32, u32, Option<u32>);
/// A sweep's points (bytes, seconds) and the nodes it ran on.
type SweepPoints = (Vec<(f64, f64)>, BTreeSet<String>);
/// A fleet curve's key: collective, scope, ranks, members per node, NVLink domains (a shape
/// run inside one NVL72 rack crosses NVLink, the same shape across racks the NICs).
type FleetKey = (Kind, Scope, u32, u32, Option<u32>);

pub(super) fn node_of(r: &Record) -> String {
    r.group
        .node
        .clone()
        .unwrap_or_else(|| "unknown".to_string())
}

/// The records by what they measured: collective sweeps, GEMM points by node and GPU, and
/// each node's best copy rate.
#[derive(Default)]
struct Grouped {
    sweeps: BTreeMap<SweepKey, SweepPoints>,
    gemm_pts: BTreeMap<(String, u32), Vec<GemmPoint>>,
    hbm: BTreeMap<String, f64>,
}

fn group_records(records: &[Record], peak_flops: f64, opts: &FitOptions) -> Grouped {
    let mut g = Grouped::default();
    // Out-of-place points only: in-place rows repeat the same sweep.
    for r in records {
        let node = node_of(r);
        match r.kind {
            // Pairs are one rail between two nodes each, not a sweep of one group: they go to
            // the NIC figures.
            k if k.is_collective() && !r.in_place && !pairs::is_pair(r) => {
                let (pts, members) = g
                    .sweeps
                    .entry((
                        node.clone(),
                        k,
                        r.group.scope,
                        r.group.ranks,
                        members_per_node(r),
                        r.detail.nvlink_domains,
                    ))
                    .or_default();
                pts.push((r.bytes as f64, r.timing.time_s));
                members.insert(node);
                members.extend(r.detail.nodes.iter().flatten().cloned());
            }
            Kind::Gemm if r.dtype == opts.gemm_dtype => {
                // GEMMs shorter than 50 us at peak are dominated by launch latency (priced apart
                // as layer overhead) or memory-bound below 1024 in a dimension; the compute curve
                // the cost model reads is fitted to the others, which is where layers live.
                // Layouts are pooled: a layer runs its forward (tn), input-gradient (nn) and
                // weight-gradient (nt) GEMMs at equal FLOPs, so their mix is what it sees.
                let long = |g: &record::Gemm| {
                    g.m.min(g.n).min(g.k) >= MIN_GEMM_DIM && g.flop() / peak_flops >= MIN_GEMM_S
                };
                if let (Some(gm), Some(f)) = (r.gemm.filter(long), r.flops) {
                    let gpu = r.group.gpus.first().copied().unwrap_or(0);
                    g.gemm_pts.entry((node, gpu)).or_default().push((
                        gm.m as f64,
                        gm.n as f64,
                        gm.k as f64,
                        f / peak_flops,
                    ));
                }
            }
            Kind::HbmCopy => {
                // The largest copies show the sustained rate; busbw counts reads and writes.
                let bw = r.busbw.or(r.algbw).unwrap_or(0.0);
                let e = g.hbm.entry(node).or_insert(0.0);
                *e = e.max(bw);
            }
            _ => {}
        }
    }
    g
}

/// An alpha-beta curve and a size table per node's sweep.
fn node_curves(sweeps: BTreeMap<SweepKey, SweepPoints>) -> Vec<NodeCurve> {
    sweeps
        .into_iter()
        .filter_map(
            |((node, kind, scope, ranks, members_per_node, nvlink_domains), (pts, members))| {
                let curve = alpha_beta::fit(&pts)?;
                let factor = busbw_factor(kind, ranks).unwrap_or(1.0);
                let busbw_bytes_per_s = curve.beta_bytes_per_s() * factor;
                let bytes_range = pts
                    .iter()
                    .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
                Some(NodeCurve {
                    node,
                    members,
                    kind,
                    scope,
                    ranks,
                    members_per_node,
                    nvlink_domains,
                    curve,
                    busbw_bytes_per_s,
                    bytes_range,
                    table: SizeTable::new(&pts).map(Arc::new),
                })
            },
        )
        .collect()
}

/// A GEMM curve per node: its slowest GPU's, which a synchronous step waits for.
fn node_gemms(gemm_pts: BTreeMap<(String, u32), Vec<GemmPoint>>) -> Vec<NodeGemm> {
    let mut per_gpu: BTreeMap<String, NodeGemm> = BTreeMap::new();
    for ((node, gpu), pts) in gemm_pts {
        if let Some(curve) = gemm::fit(&pts) {
            let slower = per_gpu
                .get(&node)
                .is_none_or(|g| curve.peak_efficiency < g.curve.peak_efficiency);
            if slower {
                per_gpu.insert(node.clone(), NodeGemm { node, gpu, curve });
            }
        }
    }
    per_gpu.into_values().collect()
}

/// The node curves of each fleet curve.
fn fleet_groups(curves: &[NodeCurve]) -> BTreeMap<FleetKey, Vec<&NodeCurve>> {
    let mut groups: BTreeMap<FleetKey, Vec<&NodeCurve>> = BTreeMap::new();
    for c in curves {
        groups
            .entry((
                c.kind,
                c.scope,
                c.ranks,
                c.members_per_node,
                c.nvlink_domains,
            ))
            .or_default()
            .push(c);
    }
    groups
}

/// The nodes behind the fleet median on each figure: collective bus bandwidth, GEMM rate,
/// HBM bandwidth and NIC rails.
fn stragglers(
    groups: &BTreeMap<FleetKey, Vec<&NodeCurve>>,
    (gemm, memory, nics): (&[NodeGemm], &[(String, f64)], &[pairs::NicFigure]),
    opts: &FitOptions,
) -> Vec<Straggler> {
    let mut stragglers = Vec::new();
    for ((kind, scope, ranks, _, domains), cs) in groups {
        let values: Vec<(String, f64)> = cs
            .iter()
            .map(|c| (c.node.clone(), c.busbw_bytes_per_s))
            .collect();
        let within = match (scope, domains) {
            (Scope::InterNode, Some(1)) => " in one NVLink domain",
            _ => "",
        };
        stragglers.extend(fleet::stragglers(
            &format!(
                "{} x{} {}{within} busbw",
                kind.as_str(),
                ranks,
                scope.as_str()
            ),
            &values,
            opts.threshold,
        ));
    }
    let gemm_values: Vec<(String, f64)> = gemm
        .iter()
        .map(|g| (g.node.clone(), g.curve.peak_efficiency))
        .collect();
    stragglers.extend(fleet::stragglers(
        &format!("GEMM {} rate", opts.gemm_dtype.as_str()),
        &gemm_values,
        opts.threshold,
    ));
    stragglers.extend(fleet::stragglers("HBM bandwidth", memory, opts.threshold));
    stragglers.extend(pairs::slow_nics(nics, opts.threshold));
    stragglers
}

/// The nodes left out, with the reason: `--exclude`, and with `--exclude-degraded` every
/// straggler.
fn excluded(opts: &FitOptions, stragglers: &[Straggler]) -> Vec<(String, String)> {
    let mut excluded: Vec<(String, String)> = opts
        .exclude
        .iter()
        .map(|n| (n.clone(), "--exclude".to_string()))
        .collect();
    if opts.exclude_degraded {
        for s in stragglers {
            if !excluded.iter().any(|(n, _)| *n == s.node) {
                excluded.push((
                    s.node.clone(),
                    format!(
                        "{} {:.0}% below the fleet median",
                        s.what,
                        s.shortfall() * 100.0
                    ),
                ));
            }
        }
    }
    excluded
}

/// One fleet curve over the kept nodes' curves of one key. It goes through the aggregated
/// node times at sizes every node swept, so it keeps the pieces (protocol change-overs) the
/// node curves have.
fn fleet_curve(key: &FleetKey, cs: &[&&NodeCurve], agg: Aggregate) -> Option<FleetCurve> {
    let (kind, scope, ranks, members_per_node, nvlink_domains) = *key;
    let lo = cs.iter().map(|c| c.bytes_range.0).fold(0.0, f64::max);
    let hi = cs.iter().map(|c| c.bytes_range.1).fold(f64::MAX, f64::min);
    let pts: Vec<(f64, f64)> = (0..=FLEET_POINTS)
        .map(|i| lo * (hi / lo).powf(f64::from(i) / f64::from(FLEET_POINTS)))
        .map(|s| {
            (
                s,
                agg.cost(&cs.iter().map(|c| c.curve.time_s(s)).collect::<Vec<_>>()),
            )
        })
        .collect();
    let curve = alpha_beta::fit(&pts)?;
    let factor = busbw_factor(kind, ranks).unwrap_or(1.0);
    let nodes_rms = cs.iter().map(|c| c.curve.rms_rel_error).fold(0.0, f64::max);
    let nodes_r2 = cs.iter().map(|c| c.curve.r2).fold(f64::INFINITY, f64::min);
    let tables: Option<Vec<&SizeTable>> = cs.iter().map(|c| c.table.as_deref()).collect();
    let table = tables
        .and_then(|t| SizeTable::aggregate(&t, agg))
        .map(Arc::new);
    Some(FleetCurve {
        table,
        kind,
        scope,
        ranks,
        members_per_node,
        nvlink_domains,
        alpha_s: curve.alpha_s(),
        beta_bytes_per_s: curve.beta_bytes_per_s(),
        busbw_bytes_per_s: curve.beta_bytes_per_s() * factor,
        rms_rel_error: nodes_rms.max(curve.rms_rel_error),
        nodes: cs.len(),
        bytes_range: (lo, hi),
        r2: nodes_r2,
        curve,
    })
}

/// The fleet's GEMM curve: the kept nodes' peak efficiencies aggregated, on the shape curve
/// of the node nearest that figure.
fn fleet_gemm(kept_gemm: &[&NodeGemm], agg: Aggregate) -> Option<GemmCurve> {
    (!kept_gemm.is_empty()).then(|| {
        let peak = agg.rate(
            &kept_gemm
                .iter()
                .map(|g| g.curve.peak_efficiency)
                .collect::<Vec<_>>(),
        );
        let pick = kept_gemm
            .iter()
            .min_by(|a, b| {
                (a.curve.peak_efficiency - peak)
                    .abs()
                    .total_cmp(&(b.curve.peak_efficiency - peak).abs())
            })
            .expect("non-empty");
        GemmCurve {
            peak_efficiency: peak,
            ..pick.curve
        }
    })
}

/// The GEMM table of the kept records of `opts.gemm_dtype`, or of fp16 where a bf16 table
/// was asked for and none was measured, with the dtype it holds.
fn gemm_table(
    kept_records: &[&Record],
    peak_flops: f64,
    opts: &FitOptions,
) -> (Option<Arc<GemmTable>>, Option<Dtype>) {
    let agg = opts.aggregate;
    let gemms_of = |dtype: Dtype| -> Vec<&Record> {
        kept_records
            .iter()
            .copied()
            .filter(|r| r.kind == Kind::Gemm && r.dtype == dtype)
            .collect()
    };
    match GemmTable::new(&gemms_of(opts.gemm_dtype), peak_flops, agg) {
        Some(t) => (Some(Arc::new(t)), Some(opts.gemm_dtype)),
        None if opts.gemm_dtype == Dtype::Bf16 => {
            let t = GemmTable::new(&gemms_of(Dtype::Fp16), peak_flops, agg).map(Arc::new);
            let dtype = t.as_ref().map(|_| Dtype::Fp16);
            (t, dtype)
        }
        None => (None, None),
    }
}

/// Fits every curve the records allow. `peak_flops` is the datasheet peak of the GPU for
/// `opts.gemm_dtype`, against which GEMM efficiency is expressed.
pub fn fit_all(records: &[Record], peak_flops: f64, opts: &FitOptions) -> Fits {
    let grouped = group_records(records, peak_flops, opts);
    let curves = node_curves(grouped.sweeps);
    let gemm = node_gemms(grouped.gemm_pts);
    let memory: Vec<(String, f64)> = grouped.hbm.into_iter().filter(|(_, v)| *v > 0.0).collect();
    let groups = fleet_groups(&curves);
    let nics = pairs::nic_figures(records);
    let stragglers = stragglers(&groups, (&gemm, &memory, &nics), opts);
    let excluded = excluded(opts, &stragglers);

    let kept = |node: &str| !excluded.iter().any(|(n, _)| n == node);
    let agg = opts.aggregate;
    let fleet: Vec<FleetCurve> = groups
        .iter()
        .filter_map(|(key, cs)| {
            let cs: Vec<&&NodeCurve> = cs
                .iter()
                .filter(|c| c.members.iter().all(|n| kept(n)))
                .collect();
            if cs.is_empty() {
                return None;
            }
            fleet_curve(key, &cs, agg)
        })
        .collect();
    let kept_gemm: Vec<&NodeGemm> = gemm.iter().filter(|g| kept(&g.node)).collect();
    let fleet_gemm = fleet_gemm(&kept_gemm, agg);
    let kept_mem: Vec<f64> = memory
        .iter()
        .filter(|(n, _)| kept(n))
        .map(|m| m.1)
        .collect();
    let fleet_nic = pairs::fleet_nic_busbw(&nics, kept, agg);
    let kept_records: Vec<&Record> = records
        .iter()
        .filter(|r| r.group.node.as_deref().is_none_or(kept))
        .collect();
    let (gemm_table, gemm_table_dtype) = gemm_table(&kept_records, peak_flops, opts);
    let attention: Vec<Record> = kept_records
        .iter()
        .filter(|r| r.kind == Kind::Attention)
        .map(|r| (*r).clone())
        .collect();
    let attention_peak = opts.attention_peak_flops.unwrap_or(f64::INFINITY);
    let attention_table = AttentionTable::new(&attention, attention_peak, agg).map(Arc::new);
    let mut nodes: Vec<String> = curves
        .iter()
        .map(|c| c.node.clone())
        .chain(gemm.iter().map(|g| g.node.clone()))
        .chain(memory.iter().map(|m| m.0.clone()))
        .chain(nics.iter().map(|f| f.node.clone()))
        .collect();
    nodes.sort();
    nodes.dedup();
    Fits {
        nodes,
        excluded,
        curves,
        fleet,
        gemm,
        fleet_gemm,
        refused: gemm_table
            .iter()
            .flat_map(|t| t.refused.iter())
            .chain(attention_table.iter().flat_map(|t| t.refused.iter()))
            .cloned()
            .collect(),
        gemm_table,
        gemm_table_dtype,
        attention_table,
        fleet_memory: (!kept_mem.is_empty()).then(|| agg.rate(&kept_mem)),
        memory,
        nics,
        fleet_nic,
        stragglers,
        aggregate: agg,
    }
}
