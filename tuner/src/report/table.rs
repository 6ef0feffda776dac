//! Plain-text tables (comfy-table). Memory in GiB (2^30 bytes), time in seconds.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, ContentArrangement, Table};

use super::doc::{Document, MeshDoc};
use super::explain::seconds;
use super::listing::{ClusterList, ModelList};
use crate::cost::collective::Source;
use crate::search::ALIKE_WITHIN;
use crate::validate::fitting::HeldOut;
use crate::validate::{Bucket, Choice, Validation};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    t
}

fn right(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

fn head(doc: &Document) -> String {
    let mut s = String::new();
    let c = &doc.cluster;
    let t = &doc.training;
    s.push_str(&format!(
        "{}: {:.1}B params on {} x {} ({}, {} per node, NVLink domain {}, {} x {:.0} Gb/s NICs per node; {} figures)\n",
        doc.model.name,
        doc.model.params / 1e9,
        c.gpus,
        c.gpu,
        c.name,
        c.gpus_per_node,
        c.nvlink_domain,
        c.nics_per_node,
        c.nic_bits_per_s / 1e9,
        c.figures
    ));
    s.push_str(&format!(
        "training: seq_len {}, global batch {} sequences = {:.2}M tokens, {}, {}, flash attention {}, overlapped grad reduce {}\n",
        t.seq_len,
        t.global_batch_sequences,
        t.global_batch_tokens / 1e6,
        t.precision,
        t.optimizer,
        t.flash_attention,
        t.overlap_grad_reduce
    ));
    s
}

fn layout(m: &MeshDoc) -> String {
    let mut s = format!("TP{} PP{} DP{}", m.mesh.tp, m.mesh.pp, m.mesh.dp);
    if m.mesh.cp > 1 {
        s.push_str(&format!(" CP{}", m.mesh.cp));
    }
    if m.mesh.ep > 1 {
        s.push_str(&format!(" EP{}", m.mesh.ep));
    }
    if let Some(etp) = m.mesh.expert_tp {
        s.push_str(&format!(" ETP{etp}"));
    }
    s
}

/// The ranked table of `recommend`: one row per group of layouts that price alike, the
/// group's other layouts listed below it, and each row's warnings by marker (the warnings
/// themselves go to stderr, once each).
pub fn recommend(doc: &Document) -> String {
    let mut s = String::new();
    if let Some(line) = &doc.top_pick_changed {
        s.push_str(&format!("{line}\n"));
    }
    s.push_str(&head(doc));
    s.push_str(&measurements(doc));
    let rows = doc.meshes.iter().filter(|m| m.equivalent_to.is_none());
    s.push_str(&format!(
        "{} configurations evaluated, {} fit in memory; the {} fastest distinct layouts (step time and memory per GPU within {:.1}% count as one)\n",
        doc.evaluated,
        doc.fitting,
        rows.count(),
        ALIKE_WITHIN * 100.0
    ));
    s.push_str(&ranked(doc).to_string());
    s.push('\n');
    s.push_str(&mesh_lines(doc));
    s
}

/// How a table row names the `i`-th distinct warning (from 0), and stderr says it.
pub fn warning_marker(i: usize) -> String {
    format!("W{}", i + 1)
}

/// The markers of a mesh's warnings, e.g. `W1 W3`.
fn markers(doc: &Document, m: &MeshDoc) -> String {
    let all = doc.distinct_warnings();
    let marks: Vec<String> = m
        .warnings
        .iter()
        .filter_map(|w| all.iter().position(|a| a == w))
        .map(warning_marker)
        .collect();
    marks.join(" ")
}

/// One row per group of layouts that price alike, with its nominal rank where measurements
/// moved it.
fn ranked(doc: &Document) -> Table {
    let compared = doc
        .meshes
        .iter()
        .any(|m| m.nominal_rank.is_some() || m.shift_cause.is_some());
    let mut header = vec![
        "#",
        "layout",
        "mb x m",
        "v",
        "ZeRO",
        "recompute",
        "SP",
        "mem GiB",
        "step s",
        "tokens/s",
        "MFU",
        "bubble",
        "alike",
        "warnings",
    ];
    if compared {
        header.push("nominal #");
    }
    let mut t = table(&header);
    for m in doc.meshes.iter().filter(|m| m.equivalent_to.is_none()) {
        let spread = (m.step_time_high_s - m.step_time_s).max(0.0);
        let step = if spread > 0.0 {
            format!("{:.3} ±{:.3}", m.step_time_s, spread)
        } else {
            format!("{:.3}", m.step_time_s)
        };
        let alike = doc
            .meshes
            .iter()
            .filter(|o| o.equivalent_to == Some(m.rank))
            .count();
        let mut row = vec![
            Cell::new(if m.tie_with_above {
                format!("{} (tie)", m.rank)
            } else {
                m.rank.to_string()
            }),
            Cell::new(layout(m)),
            Cell::new(format!("{} x {}", m.mesh.microbatch_size, m.microbatches)),
            Cell::new(m.mesh.virtual_stages),
            Cell::new(m.mesh.zero_stage),
            Cell::new(m.mesh.recompute),
            Cell::new(if m.mesh.sequence_parallel {
                "yes"
            } else {
                "no"
            }),
            Cell::new(format!("{:.1}", m.memory_per_gpu_bytes.total / GIB)),
            Cell::new(step),
            Cell::new(format!("{:.0}", m.tokens_per_s)),
            Cell::new(format!("{:.1}%", m.mfu * 100.0)),
            Cell::new(format!("{:.1}%", m.bubble_fraction * 100.0)),
            Cell::new(if alike > 0 {
                format!("+{alike}")
            } else {
                String::new()
            }),
            Cell::new(markers(doc, m)),
        ];
        if compared {
            row.push(Cell::new(
                m.nominal_rank.map_or("-".to_string(), |r| r.to_string()),
            ));
        }
        t.add_row(row);
    }
    right(&mut t, 7);
    if let Some(c) = t.column_mut(13) {
        c.set_cell_alignment(CellAlignment::Left);
    }
    t
}

/// Why each row ranks below the row above, the layouts that price like each row, how
/// measurements moved each row, and which of the first mesh's terms the measurements priced.
fn mesh_lines(doc: &Document) -> String {
    let mut s = String::new();
    let mut above: Option<usize> = None;
    for m in doc.meshes.iter().filter(|m| m.equivalent_to.is_none()) {
        if let (Some(why), Some(a)) = (&m.why_below, above) {
            let tie = if m.tie_with_above {
                " (within the uncertainty: a tie)"
            } else {
                ""
            };
            s.push_str(&format!("#{} below #{a}: {why}{tie}\n", m.rank));
        }
        above = Some(m.rank);
        let alike: Vec<String> = doc
            .meshes
            .iter()
            .filter(|o| o.equivalent_to == Some(m.rank))
            .map(|o| {
                let marks = markers(doc, o);
                let marks = if marks.is_empty() {
                    marks
                } else {
                    format!(" [{marks}]")
                };
                format!("#{} {}{marks}", o.rank, knobs_apart(m, o))
            })
            .collect();
        if !alike.is_empty() {
            s.push_str(&format!("#{} alike: {}\n", m.rank, alike.join("; ")));
        }
        if let Some(cause) = &m.shift_cause {
            let moved = match m.nominal_rank {
                Some(n) if n > m.rank => format!("up {} from nominal #{n}", n - m.rank),
                Some(n) => format!("down {} from nominal #{n}", m.rank - n),
                None => "does not fit under catalog figures".to_string(),
            };
            s.push_str(&format!("#{} {moved}: {cause}\n", m.rank));
        }
    }
    if let Some(first) = doc.meshes.first() {
        let measured: Vec<&str> = first
            .sources
            .iter()
            .filter(|(t, s)| {
                **s != Source::Nominal && first.time_s.get(*t).is_some_and(|x| x.time_s > 0.0)
            })
            .map(|(t, _)| t.name())
            .collect();
        if doc.measurements.is_some() {
            s.push_str(&format!(
                "#1 terms from measurements: {}; the rest from the catalog\n",
                if measured.is_empty() {
                    "none".to_string()
                } else {
                    measured.join(", ")
                }
            ));
        }
    }
    s
}

/// The knobs of `other` that differ from `first`'s, e.g. `DP16 CP4 mb4`.
fn knobs_apart(first: &MeshDoc, other: &MeshDoc) -> String {
    let (a, b) = (&first.mesh, &other.mesh);
    let mut knobs = Vec::new();
    for (name, x, y) in [
        ("TP", a.tp, b.tp),
        ("PP", a.pp, b.pp),
        ("DP", a.dp, b.dp),
        ("CP", a.cp, b.cp),
        ("EP", a.ep, b.ep),
        ("v", a.virtual_stages, b.virtual_stages),
        ("mb", a.microbatch_size, b.microbatch_size),
        ("ZeRO-", a.zero_stage.into(), b.zero_stage.into()),
    ] {
        if x != y {
            knobs.push(format!("{name}{y}"));
        }
    }
    if a.recompute != b.recompute {
        knobs.push(format!("recompute {}", b.recompute));
    }
    if a.sequence_parallel != b.sequence_parallel {
        knobs.push(format!(
            "SP {}",
            if b.sequence_parallel { "yes" } else { "no" }
        ));
    }
    if a.expert_tp != b.expert_tp {
        knobs.push(format!("ETP{}", b.etp()));
    }
    if a.schedule != b.schedule || a.edge_stages != b.edge_stages {
        knobs.push(format!("as {b}"));
    }
    knobs.join(" ")
}

/// The measurements section: sources, stale or simulated data, stragglers, exclusions.
fn measurements(doc: &Document) -> String {
    let Some(m) = &doc.measurements else {
        return String::new();
    };
    let mut s = String::new();
    for src in &m.sources {
        s.push_str(&format!("measurements: {src}\n"));
    }
    for st in &m.stragglers {
        s.push_str(&format!(
            "straggler: {} is {:.0}% below the fleet median on {}\n",
            st.node,
            st.shortfall * 100.0,
            st.what
        ));
    }
    for (n, why) in &m.excluded {
        s.push_str(&format!("excluded: {n} ({why})\n"));
    }
    if let Some(k) = &m.keep_cost {
        s.push_str(&format!("{k}\n"));
    }
    s
}

/// The full breakdown of one mesh (`explain`).
pub fn explain(doc: &Document) -> String {
    let mut s = head(doc);
    for m in &doc.meshes {
        s.push_str(&format!(
            "{} mb={} x {} microbatches v={} ZeRO-{} recompute={} SP={}\n",
            layout(m),
            m.mesh.microbatch_size,
            m.microbatches,
            m.mesh.virtual_stages,
            m.mesh.zero_stage,
            m.mesh.recompute,
            m.mesh.sequence_parallel
        ));
        let mut mem = table(&["memory per GPU", "GiB"]);
        let b = &m.memory_per_gpu_bytes;
        for (k, v) in [
            ("weights", b.weights),
            ("gradients", b.gradients),
            ("optimizer states", b.optimizer),
            ("activations", b.activations),
            ("other (buffers, context, fragmentation)", b.other),
            ("total", b.total),
            ("capacity", m.memory_capacity_bytes),
        ] {
            mem.add_row(vec![Cell::new(k), Cell::new(format!("{:.2}", v / GIB))]);
        }
        right(&mut mem, 1);
        s.push_str(&mem.to_string());
        s.push('\n');
        let mut t = table(&["step-time term", "time", "exposed", "share"]);
        for (name, term) in &m.time_s {
            if term.time_s == 0.0 {
                continue;
            }
            t.add_row(vec![
                Cell::new(name.label()),
                Cell::new(seconds(term.time_s)),
                Cell::new(seconds(term.exposed_s)),
                Cell::new(format!("{:.1}%", 100.0 * term.exposed_s / m.step_time_s)),
            ]);
        }
        t.add_row(vec![
            Cell::new("step"),
            Cell::new(""),
            Cell::new(seconds(m.step_time_s)),
            Cell::new("100%"),
        ]);
        right(&mut t, 1);
        s.push_str(&t.to_string());
        s.push('\n');
        s.push_str(&format!(
            "{:.0} tokens/s, MFU {:.1}%, bubble {:.1}%\n",
            m.tokens_per_s,
            m.mfu * 100.0,
            m.bubble_fraction * 100.0
        ));
    }
    s
}

/// Two meshes side by side, term by term (`compare`).
pub fn compare(doc: &Document) -> String {
    let mut s = head(doc);
    let [a, b] = &doc.meshes[..] else { return s };
    let mut t = table(&[
        "",
        &format!("A: {}", layout(a)),
        &format!("B: {}", layout(b)),
        "B - A",
    ]);
    let row = |t: &mut Table, name: &str, x: f64, y: f64, fmt: &dyn Fn(f64) -> String| {
        t.add_row(vec![
            Cell::new(name),
            Cell::new(fmt(x)),
            Cell::new(fmt(y)),
            Cell::new(fmt(y - x)),
        ]);
    };
    let sec = |v: f64| {
        if v < 0.0 {
            format!("-{}", seconds(-v))
        } else {
            seconds(v)
        }
    };
    for (name, term) in &a.time_s {
        let other = b.time_s[name];
        if term.exposed_s == 0.0 && other.exposed_s == 0.0 {
            continue;
        }
        row(
            &mut t,
            &format!("{} (exposed)", name.label()),
            term.exposed_s,
            other.exposed_s,
            &sec,
        );
    }
    row(&mut t, "step", a.step_time_s, b.step_time_s, &sec);
    let gib = |v: f64| format!("{:.1} GiB", v / GIB);
    row(
        &mut t,
        "memory per GPU",
        a.memory_per_gpu_bytes.total,
        b.memory_per_gpu_bytes.total,
        &gib,
    );
    let pct = |v: f64| format!("{:.1}%", v * 100.0);
    row(&mut t, "MFU", a.mfu, b.mfu, &pct);
    right(&mut t, 1);
    s.push_str(&format!(
        "A: mb={} v={} ZeRO-{} recompute={} SP={}\nB: mb={} v={} ZeRO-{} recompute={} SP={}\n",
        a.mesh.microbatch_size,
        a.mesh.virtual_stages,
        a.mesh.zero_stage,
        a.mesh.recompute,
        a.mesh.sequence_parallel,
        b.mesh.microbatch_size,
        b.mesh.virtual_stages,
        b.mesh.zero_stage,
        b.mesh.recompute,
        b.mesh.sequence_parallel
    ));
    s.push_str(&t.to_string());
    s.push('\n');
    s
}

/// `tuner models`.
pub fn models(list: &ModelList) -> String {
    let mut t = table(&[
        "model", "params", "layers", "hidden", "heads/kv", "ffn", "vocab", "seq", "MoE", "source",
    ]);
    for m in &list.models {
        let shape = &m.shape;
        let moe = shape.moe.as_ref().map_or("-".to_string(), |e| {
            format!("{}e top{} +{} shared", e.experts, e.top_k, e.shared_experts)
        });
        t.add_row(vec![
            Cell::new(m.id),
            Cell::new(format!("{:.1}B", m.params / 1e9)),
            Cell::new(shape.layers),
            Cell::new(shape.hidden),
            Cell::new(format!("{}/{}", shape.heads, shape.kv_heads)),
            Cell::new(format!("{} {:?}", shape.ffn_hidden, shape.ffn_act).to_lowercase()),
            Cell::new(shape.vocab),
            Cell::new(shape.seq_len),
            Cell::new(moe),
            Cell::new(m.source),
        ]);
    }
    let aliases: Vec<String> = list
        .aliases
        .iter()
        .map(|a| format!("{} -> {}", a.alias, a.model))
        .collect();
    format!("{t}\naliases: {}\n", aliases.join(", "))
}

/// `tuner clusters`.
pub fn clusters(list: &ClusterList) -> String {
    let mut t = table(&[
        "cluster",
        "gpu",
        "GPUs/node",
        "NVLink domain",
        "NICs x Gb/s",
        "bf16 TFLOP/s",
        "HBM GiB",
        "NVLink GB/s/dir",
        "source",
    ]);
    for c in &list.clusters {
        t.add_row(vec![
            Cell::new(c.preset.id),
            Cell::new(c.preset.gpu),
            Cell::new(c.preset.gpus_per_node),
            Cell::new(c.preset.nvlink_domain),
            Cell::new(format!(
                "{} x {:.0}",
                c.preset.nics_per_node,
                c.preset.nic_bits_per_s / 1e9
            )),
            Cell::new(format!("{:.0}", c.bf16_flops / 1e12)),
            Cell::new(format!("{:.1}", c.hbm_bytes / GIB)),
            Cell::new(format!("{:.0}", c.nvlink_bytes_per_s / 1e9)),
            Cell::new(c.preset.source),
        ]);
    }
    t.to_string() + "\n"
}

/// One row per run priced: prediction, observation, error, and with measurements the
/// measured price and what it moved; the knobs chosen for what the source left out.
fn run_table(v: &Validation) -> Table {
    let measured = v.measured.is_some();
    let mut header = vec!["run", "predicted s", "observed s", "error"];
    if measured {
        header.extend([
            "measured s",
            "measured error",
            "what the measurements changed",
        ]);
    }
    header.push("chosen for unpublished knobs");
    let mut t = table(&header);
    for r in &v.runs {
        let choices: Vec<String> = r
            .choices
            .iter()
            .filter(|(k, _)| **k != Choice::Attention)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut row = vec![
            Cell::new(&r.id),
            Cell::new(format!("{:.3}", r.predicted_iteration_time_s)),
            Cell::new(format!("{:.3}", r.observed_iteration_time_s)),
            Cell::new(format!("{:+.1}%", r.error * 100.0)),
        ];
        if measured {
            match (&r.measured, &r.no_measurements) {
                (Some(m), _) => {
                    let changed: Vec<String> = m.changed.iter().map(|c| c.describe()).collect();
                    row.extend([
                        Cell::new(format!("{:.3}", m.predicted_iteration_time_s)),
                        Cell::new(format!("{:+.1}%", m.error * 100.0)),
                        Cell::new(if changed.is_empty() {
                            "no term by more than 1% of the step".to_string()
                        } else {
                            changed.join("; ")
                        }),
                    ]);
                }
                (None, why) => row.extend([
                    Cell::new("-"),
                    Cell::new("-"),
                    Cell::new(why.as_deref().unwrap_or("not priced from measurements")),
                ]),
            }
        }
        row.push(Cell::new(choices.join(" ")));
        t.add_row(row);
    }
    right(&mut t, 1);
    t
}

/// `tuner validate`: every run (unless `summary_only`), the runs that could not be priced,
/// then accuracy per group and per bucket beside the constant-MFU baseline.
pub fn validation(v: &Validation, summary_only: bool) -> String {
    let mut out = String::new();
    if !summary_only {
        out.push_str(&format!("{}\n", run_table(v)));
    }
    if !v.skipped.is_empty() {
        let mut t = table(&["not priced", "file", "why"]);
        for r in &v.skipped {
            t.add_row(vec![
                Cell::new(&r.id),
                Cell::new(&r.file),
                Cell::new(&r.reason),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    let s = &v.summary;
    for (title, buckets) in [
        ("group", &s.groups),
        ("file", &s.by_file),
        ("gpu", &s.by_gpu),
        ("scale", &s.by_scale),
        ("framework", &s.by_framework),
        ("precision", &s.by_precision),
    ] {
        out.push_str(&format!("{}\n", buckets_table(title, buckets)));
    }
    out.push_str(&format!(
        "{} runs: median |error| {:.1}%, mean signed {:+.1}%, max |error| {:.1}%, {} within 10%\n\
         baseline, one MFU per file ({}): median |error| {:.1}%\n",
        s.runs,
        s.median_abs_error * 100.0,
        s.mean_signed_error * 100.0,
        s.max_abs_error * 100.0,
        s.within_10pct,
        s.baseline_mfu
            .iter()
            .map(|(f, m)| format!("{f} {m:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        s.baseline_median_abs_error * 100.0,
    ));
    if !v.skipped.is_empty() {
        out.push_str(&format!(
            "{} runs not priced (listed above)\n",
            v.skipped.len()
        ));
    }
    let fitted: Vec<String> = v
        .fitted
        .iter()
        .map(|(k, x)| format!("{k} = {x:.4e}"))
        .collect();
    out.push_str(&format!("fitted efficiencies: {}\n", fitted.join(", ")));
    if let Some(m) = &v.measured {
        out.push_str(&measured_comparison(m));
    }
    out
}

/// Nominal beside measured over the runs priced both ways, by group, file and GPU, and what
/// priced each class of call.
fn measured_comparison(m: &crate::validate::MeasuredSummary) -> String {
    let mut out = format!(
        "\nnominal against measured, over the {} runs priced both ways ({} without measurements):\n",
        m.runs, m.without
    );
    if m.runs == 0 {
        return out;
    }
    for (title, nominal, measured) in [
        ("group", &m.nominal.groups, &m.measured.groups),
        ("file", &m.nominal.by_file, &m.measured.by_file),
        ("gpu", &m.nominal.by_gpu, &m.measured.by_gpu),
    ] {
        let mut t = table(&[
            title,
            "runs",
            "nominal |error|",
            "measured |error|",
            "nominal signed",
            "measured signed",
        ]);
        for (a, b) in nominal.iter().zip(measured) {
            t.add_row(vec![
                Cell::new(&a.name),
                Cell::new(a.runs),
                Cell::new(format!("{:.1}%", a.median_abs_error * 100.0)),
                Cell::new(format!("{:.1}%", b.median_abs_error * 100.0)),
                Cell::new(format!("{:+.1}%", a.mean_signed_error * 100.0)),
                Cell::new(format!("{:+.1}%", b.mean_signed_error * 100.0)),
            ]);
        }
        right(&mut t, 1);
        out.push_str(&format!("{t}\n"));
    }
    out.push_str(&format!(
        "{} runs: median |error| nominal {:.1}%, measured {:.1}%; mean signed nominal {:+.1}%, measured {:+.1}%\n",
        m.runs,
        m.nominal.median_abs_error * 100.0,
        m.measured.median_abs_error * 100.0,
        m.nominal.mean_signed_error * 100.0,
        m.measured.mean_signed_error * 100.0,
    ));
    out.push_str("priced from (runs):\n");
    for (line, runs) in &m.priced_from {
        out.push_str(&format!("  {line} ({runs})\n"));
    }
    out
}

/// A calibration profile: each knob beside its prior, and the jobs' errors three ways.
pub fn calibration(p: &crate::calibrate::profile::Profile) -> String {
    let mut t = table(&[
        "knob",
        "catalog",
        "calibrated",
        "+- 1 sigma",
        "leave-one-job-out range",
        "range",
    ]);
    for k in &p.knobs {
        t.add_row(vec![
            Cell::new(&k.name),
            Cell::new(format!("{:.4e}", k.prior)),
            Cell::new(format!("{:.4e}", k.value)),
            Cell::new(format!("{:.2e}", k.uncertainty)),
            Cell::new(format!(
                "{:.4e} - {:.4e}",
                k.leave_one_out.0, k.leave_one_out.1
            )),
            Cell::new(format!("{:.1e} - {:.1e}", k.range.0, k.range.1)),
        ]);
    }
    right(&mut t, 1);
    let s = &p.scores;
    format!(
        "{t}\n{} jobs: median |error| {:.1}% at the catalog's knobs, {:.1}% calibrated (in sample), {:.1}% each job held out of its own calibration\n",
        s.jobs,
        s.prior_median_abs_error * 100.0,
        s.calibrated_median_abs_error * 100.0,
        s.leave_one_job_out_median_abs_error * 100.0
    )
}

fn buckets_table(title: &str, buckets: &[Bucket]) -> Table {
    let mut g = table(&[
        title,
        "runs",
        "median |error|",
        "mean signed",
        "baseline",
        "Spearman",
    ]);
    for b in buckets {
        g.add_row(vec![
            Cell::new(&b.name),
            Cell::new(b.runs),
            Cell::new(format!("{:.1}%", b.median_abs_error * 100.0)),
            Cell::new(format!("{:+.1}%", b.mean_signed_error * 100.0)),
            Cell::new(format!("{:.1}%", b.baseline_median_abs_error * 100.0)),
            Cell::new(match (b.spearman, b.runs) {
                (Some(r), _) => format!("{r:.2}"),
                (None, n) if n >= 3 => "tied".to_string(),
                (None, _) => "-".to_string(),
            }),
        ]);
    }
    right(&mut g, 1);
    g
}

/// `tuner validate --leave-one-source-out`: each source's error with the fitted
/// efficiencies refitted without it.
pub fn held_out(rows: &[HeldOut]) -> String {
    let mut header = vec!["held-out source", "runs", "median |error|", "mean signed"];
    let names: Vec<String> = rows
        .first()
        .map(|r| r.fitted.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    header.extend(names.iter().map(String::as_str));
    let mut t = table(&header);
    for r in rows {
        let mut row = vec![
            Cell::new(&r.source),
            Cell::new(r.runs),
            Cell::new(format!("{:.1}%", r.median_abs_error * 100.0)),
            Cell::new(format!("{:+.1}%", r.mean_signed_error * 100.0)),
        ];
        row.extend(r.fitted.iter().map(|(_, v)| Cell::new(format!("{v:.3e}"))));
        t.add_row(row);
    }
    right(&mut t, 1);
    let all: Vec<f64> = rows.iter().map(|r| r.median_abs_error).collect();
    format!(
        "{t}\nleave-one-source-out: median over sources of the held-out median |error| {:.1}%\n",
        crate::validate::median(all) * 100.0
    )
}
