//! Measured figures cached from the last calibration (collectives, p2p matrix, GEMM, memory
//! bandwidths) and the calibration's own state (last success, duration, runs by result). The
//! collective families also carry the job-wide inter-node collectives of the last fabric run
//! (issue 12): one family cannot be written twice in a scrape, so they are rendered here.
//!
//! Sizes and GEMM shapes come from fixed small sets, so the series count stays bounded
//! whatever the sweep measured; `/v1/results` has every record.

use super::topology::{borrow, gpu_labels, node_model, with_model};
use super::{Collector, FamilyData, Out, Type};
use crate::cache::Snapshot;
use crate::fabric::Fabric;
use crate::state::{self, RunResult};
use microbench::discovery::Topology;
use microbench::sweep::transformer_shapes;
use record::{Family, Gemm, GemmLayout, Kind, Record, Scope};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Message sizes exported as `size_bytes`: 1 KiB (latency-bound) to 1 GiB (bandwidth-bound),
/// every factor of 4 from 1 MiB, so that a fabric run's default sweep (1 MiB to 64 MiB, issue
/// 12) leaves the tuner four points of each inter-node curve in Prometheus (its fit needs
/// three).
pub const SIZES: [u64; 8] = [
    1 << 10,
    1 << 16,
    1 << 20,
    1 << 22,
    1 << 24,
    1 << 26,
    1 << 28,
    1 << 30,
];

/// GEMM shapes exported: squares of 1024, 4096 and 8192, and the four GEMMs of a hidden-8192
/// layer at TP 8 for 8192 tokens (all in microbench's default calibration shapes).
pub fn gemm_shapes() -> Vec<Gemm> {
    let mut shapes: Vec<Gemm> = [1024, 4096, 8192]
        .iter()
        .map(|&s| Gemm { m: s, n: s, k: s })
        .collect();
    shapes.extend(transformer_shapes(8192, 8192, 8));
    shapes
}

/// The exported size a collective record was swept at: the set member it is, or that it was
/// rounded down from to whole elements on every rank (as nccl-tests rounds).
fn nominal_size(r: &Record) -> Option<u64> {
    let unit = r.dtype.size_bytes() * u64::from(r.group.ranks.max(1));
    SIZES
        .iter()
        .copied()
        .find(|&s| r.bytes <= s && s - r.bytes < unit)
}

/// Calibration families. The measured ones change only when a run ends, so they are kept
/// and reused until the calibration, the fabric results or the topology changes (a
/// rendering then shares them instead of walking thousands of records).
pub struct Calibration {
    memo: Mutex<Option<Memo>>,
}

/// Measured families for one calibration, fabric run and topology (held, so no address can
/// be reused by a newer one while the families are kept).
struct Memo {
    calibration: Arc<state::Calibration>,
    fabric: Arc<Fabric>,
    topology: Option<Arc<Topology>>,
    families: Vec<Arc<FamilyData>>,
}

/// The calibration collector.
pub static CALIBRATION: Calibration = Calibration {
    memo: Mutex::new(None),
};

impl Collector for Calibration {
    fn name(&self) -> &'static str {
        "calibration"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        state_families(s, out);
        let topology = s.discovery.found().cloned();
        let mut memo = self
            .memo
            .lock()
            .map_err(|_| "memo lock poisoned".to_string())?;
        let fresh = memo.as_ref().is_some_and(|m| {
            Arc::ptr_eq(&m.calibration, &s.calibration)
                && Arc::ptr_eq(&m.fabric, &s.fabric)
                && match (&m.topology, &topology) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                }
        });
        if !fresh {
            let mut measured = Out::new(s);
            measured_families(s, &mut measured);
            *memo = Some(Memo {
                calibration: s.calibration.clone(),
                fabric: s.fabric.clone(),
                topology,
                families: measured.families,
            });
        }
        if let Some(m) = memo.as_ref() {
            out.families.extend(m.families.iter().cloned());
        }
        Ok(())
    }
}

/// Last success, duration, last result, in progress, runs by result.
fn state_families(s: &Snapshot, out: &mut Out) {
    let c = &s.calibration;
    if let Some(at) = c.last_success_timestamp {
        out.family(
                Family::CalibrationLastSuccess.as_str(),
                Type::Gauge,
                "End of the last calibration that measured every point, seconds since the Unix epoch (kept across restarts).",
            )
            .sample(&[], at);
    }
    if let Some(run) = &c.last_run {
        out.family(
            "meshfit_calibration_duration_seconds",
            Type::Gauge,
            "Wall time of the last calibration run in seconds, whatever its result.",
        )
        .sample(&[], run.duration_s);
        let mut last = out.family(
            "meshfit_calibration_last_result",
            Type::Gauge,
            "1 for how the last calibration run ended, 0 for the other results.",
        );
        for r in RunResult::ALL {
            last.sample(
                &[("result", r.as_str())],
                f64::from(u8::from(r == run.result)),
            );
        }
    }
    out.family(
        "meshfit_calibration_in_progress",
        Type::Gauge,
        "1 while a calibration runs.",
    )
    .sample(&[], f64::from(u8::from(s.running)));
    let mut runs = out.family(
            "meshfit_calibration_runs_total",
            Type::Counter,
            "Calibration runs since the agent started, by result (skipped_busy: GPUs were busy, nothing ran).",
        );
    for (r, n) in RunResult::ALL.iter().zip(s.runs_total) {
        runs.sample(&[("result", r.as_str())], n as f64);
    }
    out.family(
        "meshfit_state_distrusted_parts",
        Type::Gauge,
        "Parts of the state file not trusted at start: another node's file, a last success in the future, negative times (the log names them).",
    )
    .sample(&[], s.state_distrusted as f64);
    out.family(
        "meshfit_state_write_failures_total",
        Type::Counter,
        "State file writes that failed since the agent started; those results are served but not kept across a restart.",
    )
    .sample(&[], s.state_write_failures as f64);
}

/// Collectives, GEMM, p2p and memory bandwidths from the records.
fn measured_families(s: &Snapshot, out: &mut Out) {
    let c = &s.calibration;
    let t = s.discovery.found();
    collectives(
        c.records.iter().chain(&s.fabric.collectives),
        t.map(|t| node_model(t)),
        out,
    );
    let Some(t) = t else {
        return;
    };
    // Per-GPU series carry the GPU's own model, so that the curves group reduces them per
    // model without joining every node's series to its model (issue 28). Built once per GPU,
    // not per record.
    let gpu_series_labels: BTreeMap<u32, Vec<(&str, String)>> = t
        .gpus
        .iter()
        .map(|g| {
            let mut l = gpu_labels(g).to_vec();
            l.push(("model_name", g.name.clone()));
            (g.index, l)
        })
        .collect();
    let labels_of = |gpu: u32| gpu_series_labels.get(&gpu);
    let mut p2p: BTreeMap<(u32, u32, &str), &Record> = BTreeMap::new();
    let mut memory: BTreeMap<(u32, &str, &str), &Record> = BTreeMap::new();
    let mut gemm = out.family(
            Family::GemmFlops.as_str(),
            Type::Gauge,
            "GEMM throughput in FLOP/s (2mnk per multiply, fixed shape set), with the GPU's model, cached from the last calibration.",
        );
    let shapes = gemm_shapes();
    let mut gemm_peak: BTreeMap<(u32, &str, &str), f64> = BTreeMap::new();
    for r in &c.records {
        let kind = r.kind;
        let gpus = &r.group.gpus;
        let backend = r.backend.as_str();
        match (kind, gpus.as_slice()) {
            (Kind::Gemm, [gpu]) => {
                let (Some(shape), Some(flops), Some(labels)) = (r.gemm, r.flops, labels_of(*gpu))
                else {
                    continue;
                };
                if !shapes.contains(&shape) {
                    continue;
                }
                // One series per shape, the forward layout's (issue 10): design.md's labels
                // have no layout, and a layout label would triple the main shapes' series for
                // figures the tuner does not price apart; `/v1/results` has the `nn` and `nt`
                // records. A record without a layout predates layouts: one per shape already.
                if r.detail.layout.is_some_and(|l| l != GemmLayout::Tn) {
                    continue;
                }
                let (m, n, k) = (
                    shape.m.to_string(),
                    shape.n.to_string(),
                    shape.k.to_string(),
                );
                let mut l = borrow(labels);
                l.extend([
                    ("dtype", r.dtype.as_str()),
                    ("m", m.as_str()),
                    ("n", n.as_str()),
                    ("k", k.as_str()),
                    ("backend", backend),
                ]);
                gemm.sample(&l, flops);
                let peak = gemm_peak
                    .entry((*gpu, r.dtype.as_str(), backend))
                    .or_insert(flops);
                *peak = peak.max(flops);
            }
            // One-way copies make the matrix; the largest size gives the link's rate.
            (Kind::P2pCopy, [src, dst]) if r.group.ranks == 1 => {
                let e = p2p.entry((*src, *dst, backend)).or_insert(r);
                if r.bytes > e.bytes {
                    *e = r;
                }
            }
            (Kind::H2d | Kind::D2h | Kind::HbmCopy, [gpu]) => {
                let e = memory.entry((*gpu, kind.as_str(), backend)).or_insert(r);
                if r.bytes > e.bytes {
                    *e = r;
                }
            }
            _ => {}
        }
    }
    // Each GPU's best exported shape per dtype, with the GPU's own model: what the fleet rules
    // compare, 4 series per GPU where the rules would otherwise reduce 28 on every evaluation.
    let mut family = out.family(
            "meshfit_gemm_peak_flops_per_second",
            Type::Gauge,
            "Highest GEMM throughput in FLOP/s over the exported shapes (meshfit_gemm_flops_per_second) per GPU and dtype, with the GPU's model, cached from the last calibration.",
        );
    for ((gpu, dtype, backend), flops) in &gemm_peak {
        let Some(labels) = labels_of(*gpu) else {
            continue;
        };
        let mut l = borrow(labels);
        l.extend([("dtype", *dtype), ("backend", *backend)]);
        family.sample(&l, *flops);
    }
    let mut family = out.family(
            "meshfit_p2p_bandwidth_bytes_per_second",
            Type::Gauge,
            "One-way copy bandwidth from gpu to peer_gpu in bytes per second at the largest size measured, cached from the last calibration.",
        );
    for ((src, dst, backend), r) in &p2p {
        if let Some(bw) = r.busbw.or(r.algbw) {
            let (a, b) = (src.to_string(), dst.to_string());
            family.sample(&[("gpu", &a), ("peer_gpu", &b), ("backend", backend)], bw);
        }
    }
    let mut family = out.family(
            Family::MemoryBandwidth.as_str(),
            Type::Gauge,
            "Copy bandwidth in bytes per second at the largest size measured, by path (h2d, d2h, hbm_copy counting reads and writes), with the GPU's model, cached from the last calibration.",
        );
    for ((gpu, path, backend), r) in &memory {
        if let (Some(bw), Some(labels)) = (r.busbw.or(r.algbw), labels_of(*gpu)) {
            let mut l = borrow(labels);
            l.extend([("path", *path), ("backend", *backend)]);
            family.sample(&l, bw);
        }
    }
}

/// Collective time and bus bandwidth per (collective, scope, ranks, size, backend), and for
/// inter-node records the ranks per node, without which ranks alone do not say which curve
/// was measured (16 ranks as 2 x 8 and as 16 x 1 differ eightfold), and where known the
/// NVLink domains the ranks spanned (8 trays of one NVL72 rack run over NVLink, of 8 racks
/// over the NICs). A fabric run measures each shape over one set of nodes, so the domains
/// add no series. Where several groups
/// of one size were measured (a cube-mesh has differing pairs), the slowest stands for them:
/// a parallel group is as fast as its slowest member.
///
/// With the node's GPU model known, every series carries it as `model_name`, and the node also
/// exports each collective's peak bus bandwidth over the sizes
/// (the bandwidth-bound end, where a slow link shows), labelled with that model: the series
/// the fleet rules compare nodes by, a few per node instead of every size.
fn collectives<'a>(records: impl Iterator<Item = &'a Record>, model: Option<&str>, out: &mut Out) {
    type Key<'a> = (
        &'a str,
        &'a str,
        u32,
        Option<u32>,
        Option<u32>,
        u64,
        &'a str,
    );
    let mut slowest: BTreeMap<Key, (f64, Option<f64>)> = BTreeMap::new();
    for r in records.filter(|r| r.kind.is_collective() && !r.in_place) {
        let Some(size) = nominal_size(r) else {
            continue;
        };
        let (per_node, domains) = match r.group.scope {
            Scope::InterNode => (r.detail.ranks_per_node, r.detail.nvlink_domains),
            Scope::IntraNode => (None, None),
        };
        let key = (
            r.kind.as_str(),
            r.group.scope.as_str(),
            r.group.ranks,
            per_node,
            domains,
            size,
            r.backend.as_str(),
        );
        let e = slowest.entry(key).or_insert((r.timing.time_s, r.busbw));
        if r.timing.time_s >= e.0 {
            *e = (r.timing.time_s, r.busbw);
        }
    }
    for (name, help, busbw) in [
        (
            Family::CollectiveTime.as_str(),
            "Median time of the collective in seconds (out-of-place, slowest group of that size, fixed size set), with the node's GPU model once discovery has named it, cached from the last calibration (intra_node) or the last fabric run (inter_node, with ranks_per_node, and nvlink_domains where known: 1 when every rank shared one NVLink fabric).",
            false,
        ),
        (
            "meshfit_collective_busbw_bytes_per_second",
            "Bus bandwidth of the collective in bytes per second (nccl-tests convention, slowest group of that size), with the node's GPU model once discovery has named it, cached from the last calibration (intra_node) or the last fabric run (inter_node, with ranks_per_node, and nvlink_domains where known: 1 when every rank shared one NVLink fabric).",
            true,
        ),
    ] {
        let mut family = out.family(name, Type::Gauge, help);
        for ((kind, scope, ranks, per_node, domains, size, backend), (time, bw)) in &slowest {
            let value = if busbw { *bw } else { Some(*time) };
            if let Some(v) = value {
                let grouping = grouping_labels(kind, scope, *ranks, *per_node, *domains);
                let size = size.to_string();
                let mut labels = with_model(model, &borrow(&grouping));
                labels.extend([("size_bytes", size.as_str()), ("backend", *backend)]);
                family.sample(&labels, v);
            }
        }
    }
    let Some(model) = model else {
        return;
    };
    type PeakKey<'a> = (&'a str, &'a str, u32, Option<u32>, Option<u32>, &'a str);
    let mut peaks: BTreeMap<PeakKey, f64> = BTreeMap::new();
    for ((kind, scope, ranks, per_node, domains, _, backend), (_, bw)) in &slowest {
        if let Some(bw) = *bw {
            let peak = peaks
                .entry((kind, scope, *ranks, *per_node, *domains, backend))
                .or_insert(bw);
            *peak = peak.max(bw);
        }
    }
    let mut family = out.family(
            "meshfit_collective_peak_busbw_bytes_per_second",
            Type::Gauge,
            "Highest bus bandwidth of the collective over the exported sizes (meshfit_collective_busbw_bytes_per_second), with the node's GPU model, cached from the last calibration (intra_node) or the last fabric run (inter_node, with ranks_per_node).",
        );
    for ((kind, scope, ranks, per_node, domains, backend), bw) in &peaks {
        let grouping = grouping_labels(kind, scope, *ranks, *per_node, *domains);
        let mut labels = with_model(Some(model), &borrow(&grouping));
        labels.push(("backend", *backend));
        family.sample(&labels, *bw);
    }
}

/// The labels that say which collective group a series measured: the collective, scope and
/// rank count, and where known the ranks per node and the NVLink domains the ranks spanned.
fn grouping_labels(
    kind: &str,
    scope: &str,
    ranks: u32,
    per_node: Option<u32>,
    domains: Option<u32>,
) -> Vec<(&'static str, String)> {
    let mut labels = vec![
        ("collective", kind.to_string()),
        ("scope", scope.to_string()),
        ("ranks", ranks.to_string()),
    ];
    labels.extend(per_node.map(|p| ("ranks_per_node", p.to_string())));
    labels.extend(domains.map(|d| ("nvlink_domains", d.to_string())));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Cache, Discovery};
    use microbench::plan::{CopyPath, Plan};
    use microbench::sweep::Sweep;
    use microbench::{sim, Backend, SimBackend};
    use record::Dtype;

    /// Renders the calibration families of `profile` after `plan`.
    fn render(profile: &str, plan: &Plan) -> String {
        let node = SimBackend::new(sim::profile(profile).unwrap(), vec![], 7).unwrap();
        let outcome = node.run(plan, &mut |_| {}).unwrap();
        let calibration = state::Calibration {
            records: outcome.records,
            ..state::Calibration::default()
        };
        let cache = Cache::new("n1".into(), record::Backend::Sim, calibration);
        cache.update(|s| s.discovery = Discovery::Found(Arc::new(node.topology().unwrap())));
        let snapshot = cache.snapshot();
        let mut out = Out::new(&snapshot);
        CALIBRATION.collect(&snapshot, &mut out).unwrap();
        out.text()
    }

    fn sweep(min_bytes: u64, max_bytes: u64) -> Sweep {
        Sweep {
            min_bytes,
            max_bytes,
            factor: 2,
            increment: 0,
        }
    }

    #[test]
    fn only_the_fixed_sizes_and_shapes_become_series() {
        let mut plan = Plan::collectives(
            Kind::AllGather,
            &[(0..6).collect()],
            &sweep(512, 4096),
            Dtype::Bf16,
            5,
            1,
        )
        .unwrap();
        let odd = Gemm {
            m: 1000,
            n: 1000,
            k: 1000,
        };
        let square = Gemm {
            m: 8192,
            n: 8192,
            k: 8192,
        };
        // Two layouts of one shape make one series, the forward layout's.
        plan.extend(Plan::gemms(
            &[0],
            &[odd, square],
            &[Dtype::Bf16],
            &[GemmLayout::Tn, GemmLayout::Nt],
            5,
            1,
        ));
        plan.extend(
            Plan::copies(
                &[CopyPath::P2p {
                    src: 0,
                    dst: 1,
                    bidirectional: false,
                }],
                &sweep(1 << 20, 1 << 22),
                5,
                1,
            )
            .unwrap(),
        );
        let text = render("dgx-h100", &plan);
        let sizes: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("meshfit_collective_time_seconds{"))
            .map(|l| {
                l.split("size_bytes=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        // 6 ranks of bf16: 1024 rounds down to 1020 bytes and is still the 1 KiB point.
        assert_eq!(sizes, vec!["1024"]);
        let gemms: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("meshfit_gemm_flops_per_second{"))
            .collect();
        assert_eq!(gemms.len(), 1);
        assert!(gemms[0].contains("m=\"8192\",n=\"8192\",k=\"8192\",backend=\"sim\""));
        let p2p: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("meshfit_p2p_bandwidth_bytes_per_second{"))
            .collect();
        assert_eq!(p2p.len(), 1, "the largest size stands for the pair");
        assert!(
            p2p[0].starts_with("meshfit_p2p_bandwidth_bytes_per_second{gpu=\"0\",peer_gpu=\"1\"")
        );
    }

    /// The values of `family`'s series whose labels hold every one of `having`.
    fn values(text: &str, family: &str, having: &[&str]) -> Vec<f64> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .filter(|l| having.iter().all(|h| l.contains(h)))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect()
    }

    /// `kind` in bf16 over GPUs 0-7, from 1 MiB to `max_bytes`.
    fn over_eight_gpus(kind: Kind, max_bytes: u64) -> Plan {
        Plan::collectives(
            kind,
            &[(0..8).collect()],
            &sweep(1 << 20, max_bytes),
            Dtype::Bf16,
            5,
            1,
        )
        .unwrap()
    }

    /// The peak series are the maximum over the sizes (shapes) of the series they summarise,
    /// one per collective and group size (GPU and dtype), with the node's (GPU's) model.
    #[test]
    fn peaks_are_the_best_exported_size_and_shape() {
        let mut plan = over_eight_gpus(Kind::AllReduce, 1 << 30);
        let shapes = gemm_shapes();
        plan.extend(Plan::gemms(
            &[0, 1],
            &shapes[..3],
            &[Dtype::Bf16],
            &[GemmLayout::Tn, GemmLayout::Nt],
            5,
            1,
        ));
        let text = render("dgx-h100", &plan);
        let busbw = values(
            &text,
            "meshfit_collective_busbw_bytes_per_second",
            &["all_reduce"],
        );
        assert_eq!(busbw.len(), 6, "1 MiB to 1 GiB: six exported sizes\n{text}");
        let peak = "meshfit_collective_peak_busbw_bytes_per_second";
        assert_eq!(
            values(&text, peak, &[]),
            [busbw.iter().copied().fold(0.0, f64::max)]
        );
        assert!(text.contains(&format!("{peak}{{model_name=\"NVIDIA H100 80GB HBM3\",collective=\"all_reduce\",scope=\"intra_node\",ranks=\"8\",backend=\"sim\",hostname=\"n1\"}}")), "{text}");
        for gpu in ["gpu=\"0\"", "gpu=\"1\""] {
            let shapes = values(&text, "meshfit_gemm_flops_per_second", &[gpu]);
            assert_eq!(shapes.len(), 3);
            let peaks = values(
                &text,
                "meshfit_gemm_peak_flops_per_second",
                &[
                    gpu,
                    "model_name=\"NVIDIA H100 80GB HBM3\"",
                    "dtype=\"bf16\"",
                ],
            );
            assert_eq!(peaks, [shapes.iter().copied().fold(0.0, f64::max)]);
        }
    }

    /// Every series the curves group reduces per GPU model carries the model, so that no rule
    /// joins a node's sizes and shapes to it: the node's for collectives, the GPU's own for
    /// GEMM and copies.
    #[test]
    fn r28_3_sizes_shapes_and_copies_carry_the_model() {
        let mut plan = over_eight_gpus(Kind::AllGather, 1 << 22);
        plan.extend(Plan::gemms(
            &[0],
            &gemm_shapes()[..1],
            &[Dtype::Bf16],
            &[GemmLayout::Tn],
            5,
            1,
        ));
        plan.extend(
            Plan::copies(&[CopyPath::Hbm { gpu: 0 }], &sweep(1 << 20, 1 << 22), 5, 1).unwrap(),
        );
        let text = render("dgx-h100", &plan);
        let model = "model_name=\"NVIDIA H100 80GB HBM3\"";
        for family in [
            "meshfit_collective_time_seconds",
            "meshfit_collective_busbw_bytes_per_second",
            "meshfit_gemm_flops_per_second",
            "meshfit_memory_bandwidth_bytes_per_second",
        ] {
            let all = values(&text, family, &[]);
            assert!(!all.is_empty(), "{family}\n{text}");
            assert_eq!(values(&text, family, &[model]), all, "{family}\n{text}");
        }
    }

    /// On a DGX-1 cube-mesh the pairs differ (NV1 or NV2): one series per size, the slowest.
    #[test]
    fn differing_groups_of_one_size_report_the_slowest() {
        let node = SimBackend::new(sim::profile("dgx1-v100").unwrap(), vec![], 7).unwrap();
        let pairs = microbench::sweep::groups(&node.topology().unwrap(), 2);
        assert_eq!(pairs.len(), 4);
        let plan = Plan::collectives(
            Kind::AllReduce,
            &pairs,
            &sweep(1 << 30, 1 << 30),
            Dtype::Bf16,
            5,
            1,
        )
        .unwrap();
        let outcome = node.run(&plan, &mut |_| {}).unwrap();
        let slowest = outcome
            .records
            .iter()
            .filter(|r| !r.in_place)
            .map(|r| r.timing.time_s)
            .fold(0.0, f64::max);
        let text = render("dgx1-v100", &plan);
        let times: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("meshfit_collective_time_seconds{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(times, vec![slowest]);
    }
}
