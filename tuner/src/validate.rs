//! Predicting published runs: read a runs file (format 1, `shared/data/published-runs.yaml`),
//! price each run's published layout, choose the unpublished knobs as a careful user would
//! (the fastest layout that fits, within what was published), and score the predictions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{self, Cluster, Efficiency};
use crate::cost::{Evaluation, Scenario};
use crate::error::{bad_input, TunerError};
use crate::mesh::{Precision, Recompute, Training};
use crate::model::{FfnAct, ModelShape, Moe};
use crate::search::{for_each_evaluation, Constraints};

/// A runs file.
#[derive(Debug, Deserialize)]
pub struct RunsFile {
    /// Format version; 1 is the only one.
    pub format: u32,
    /// The runs.
    pub runs: Vec<Run>,
}

/// One published run.
#[derive(Debug, Deserialize)]
pub struct Run {
    /// Unique id.
    pub id: String,
    /// Runs that share model and cluster.
    pub group: String,
    /// Where the run is published.
    pub source: String,
    /// Model shape.
    pub model: RunModel,
    /// Cluster.
    pub cluster: RunCluster,
    /// Published layout; `None` = not published.
    pub layout: RunLayout,
    /// What was measured.
    pub observed: Observed,
}

/// Model shape as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
pub struct RunModel {
    pub name: String,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: Option<u32>,
    pub ffn_hidden: Option<u32>,
    pub ffn_act: FfnAct,
    pub vocab: u32,
    pub seq_len: u32,
    pub tied_embeddings: bool,
    #[serde(default)]
    pub moe: Option<Moe>,
}

/// Cluster as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
pub struct RunCluster {
    pub gpu: String,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub nics_per_node: u32,
    pub nic_gbps: f64,
}

/// Layout as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
pub struct RunLayout {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: Option<u32>,
    pub cp: Option<u32>,
    pub virtual_stages: Option<u32>,
    pub microbatch_size: Option<u32>,
    pub global_batch_size: u32,
    pub zero_stage: Option<u8>,
    pub recompute: Option<Recompute>,
    pub sequence_parallel: Option<bool>,
    pub schedule: Option<String>,
}

/// Measurements of a run.
#[derive(Debug, Deserialize)]
pub struct Observed {
    /// Seconds per iteration.
    pub iteration_time_s: f64,
    /// The source's own TFLOP/s per GPU.
    #[serde(default)]
    pub tflops_per_gpu: Option<f64>,
    /// Which FLOP count the source used for it.
    #[serde(default)]
    pub tflops_kind: Option<String>,
}

/// The prediction of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunPrediction {
    /// Run id.
    pub id: String,
    /// Group.
    pub group: String,
    /// Predicted seconds per iteration.
    pub predicted_iteration_time_s: f64,
    /// Published seconds per iteration.
    pub observed_iteration_time_s: f64,
    /// Predicted tokens/s, whole job.
    pub predicted_tokens_per_s: f64,
    /// Published tokens/s, from the published iteration time.
    pub observed_tokens_per_s: f64,
    /// predicted / observed - 1.
    pub error: f64,
    /// Memory per GPU the cost model predicts for the chosen layout, bytes.
    pub memory_per_gpu_bytes: f64,
    /// Knobs the file left null and what was chosen for them.
    pub choices: BTreeMap<String, String>,
    /// Notes, such as a layout our memory model says does not fit.
    pub notes: Vec<String>,
}

/// Accuracy inside one group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    /// Group name.
    pub group: String,
    /// Runs in it.
    pub runs: usize,
    /// Median |error|.
    pub median_abs_error: f64,
    /// Spearman rank correlation between predicted and observed throughput; `None` with
    /// fewer than 3 runs.
    pub spearman: Option<f64>,
}

/// Accuracy over the file.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Runs predicted.
    pub runs: usize,
    /// Median |error|.
    pub median_abs_error: f64,
    /// Largest |error|.
    pub max_abs_error: f64,
    /// Runs with |error| <= 10%.
    pub within_10pct: usize,
    /// Per group.
    pub groups: Vec<GroupSummary>,
    /// The naive baseline: one MFU for the whole file, step = FLOPs / (GPUs x peak x MFU).
    pub constant_mfu_baseline: Baseline,
}

/// Scores of the constant-MFU baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The MFU that minimises the median |error|.
    pub mfu: f64,
    /// Its median |error|.
    pub median_abs_error: f64,
    /// Its largest |error|.
    pub max_abs_error: f64,
}

/// The whole validation report.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    /// One entry per run.
    pub runs: Vec<RunPrediction>,
    /// Scores.
    pub summary: Summary,
}

/// Parses a runs file.
pub fn parse_runs(text: &str, origin: &str) -> Result<RunsFile, TunerError> {
    let file: RunsFile = serde_saphyr::from_str(text).map_err(|e| TunerError::Yaml {
        origin: origin.to_string(),
        message: e.to_string(),
    })?;
    if file.format != 1 {
        return Err(bad_input("format", file.format, "1"));
    }
    Ok(file)
}

impl Run {
    fn shape(&self) -> Result<ModelShape, TunerError> {
        let m = &self.model;
        let shape = ModelShape {
            name: m.name.clone(),
            layers: m.layers,
            hidden: m.hidden,
            heads: m.heads,
            kv_heads: m.kv_heads.unwrap_or(m.heads),
            ffn_hidden: m.ffn_hidden.unwrap_or(4 * m.hidden),
            ffn_act: m.ffn_act,
            vocab: m.vocab,
            seq_len: m.seq_len,
            tied_embeddings: m.tied_embeddings,
            moe: m.moe.clone(),
        };
        shape.validate()?;
        Ok(shape)
    }

    fn cluster(&self) -> Result<Cluster, TunerError> {
        let gpu = catalog::gpu(&self.cluster.gpu)?.clone();
        let nvlink_domain = if gpu.nvlink_bytes_per_s > 0.0 {
            self.cluster.gpus_per_node
        } else {
            1
        };
        Ok(Cluster {
            name: format!("{} x{}", gpu.id, self.cluster.gpus),
            gpu,
            gpus_per_node: self.cluster.gpus_per_node,
            nvlink_domain,
            nics_per_node: self.cluster.nics_per_node,
            nic_bits_per_s: self.cluster.nic_gbps * 1e9,
        })
    }

    /// The constraints the published layout fixes.
    fn constraints(&self) -> Constraints {
        let l = &self.layout;
        let interleaved = l.schedule.as_deref() == Some("interleaved") && l.pp > 1;
        Constraints {
            tp: Some(l.tp),
            pp: Some(l.pp),
            dp: Some(l.dp),
            cp: Some(l.cp.unwrap_or(1)),
            ep: Some(l.ep.unwrap_or(1)),
            microbatch_size: l.microbatch_size,
            microbatches: None,
            virtual_stages: l
                .virtual_stages
                .or(if interleaved { None } else { Some(1) }),
            zero_stage: l.zero_stage,
            recompute: l.recompute,
            sequence_parallel: l.sequence_parallel,
        }
    }
}

/// FlashAttention's first publication (Dao et al. 2022, arXiv 2205.14135). Runs published
/// before it computed the s x s attention scores through HBM.
const FLASH_ATTENTION_ARXIV: (u32, u32) = (2205, 14135);

/// Whether the run's stack had fused (flash) attention: runs whose source paper predates
/// FlashAttention did not; the others (llm-foundry and later) did.
fn used_flash_attention(source: &str) -> bool {
    let Some(rest) = source.split("arXiv:").nth(1) else {
        return true;
    };
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    match id
        .split_once('.')
        .map(|(a, b)| (a.parse::<u32>(), b.parse::<u32>()))
    {
        Some((Ok(yymm), Ok(num))) => (yymm, num) >= FLASH_ATTENTION_ARXIV,
        _ => true,
    }
}

/// How validation trains: the published runs predate overlapped gradient reduction in
/// Megatron-LM (added in 2023), and their FSDP runs overlap through ZeRO-3 prefetching, which
/// the cost model prices on its own.
fn training(run: &Run) -> Training {
    Training {
        seq_len: run.model.seq_len,
        global_batch: run.layout.global_batch_size,
        precision: Precision::Bf16,
        optimizer: "adam",
        flash_attention: used_flash_attention(&run.source),
        overlap_grad_reduce: false,
    }
}

/// Predicts one run.
pub fn predict(run: &Run, efficiency: &Efficiency) -> Result<RunPrediction, TunerError> {
    let shape = run.shape()?;
    let cluster = run.cluster()?;
    let training = training(run);
    let gpus = run.cluster.gpus;
    let c = run.constraints();
    if run.layout.tp * run.layout.pp * run.layout.dp * c.cp.unwrap_or(1) != gpus {
        return Err(bad_input(
            &format!("runs[{}].layout", run.id),
            format!(
                "tp x pp x dp x cp = {}",
                run.layout.tp * run.layout.pp * run.layout.dp * c.cp.unwrap_or(1)
            ),
            &format!("cluster.gpus = {gpus}"),
        ));
    }
    let scenario = Scenario::nominal(shape, training.clone(), cluster, gpus, efficiency.clone());
    // A careful user shards no more than the model needs: among the ZeRO stages left open,
    // the lowest one with a layout that fits, then the fastest layout at that stage.
    let mut best_fit: Option<Evaluation> = None;
    let mut best_any: Option<Evaluation> = None;
    for_each_evaluation(&scenario, &c, |e| {
        let better = |b: &Option<Evaluation>| {
            b.as_ref().is_none_or(|b| {
                (e.mesh.zero_stage, e.step_time_s) < (b.mesh.zero_stage, b.step_time_s)
            })
        };
        if e.fits() && better(&best_fit) {
            best_fit = Some(e.clone());
        }
        if better(&best_any) {
            best_any = Some(e);
        }
    });
    let mut notes = Vec::new();
    let chosen = match (best_fit, best_any) {
        (Some(e), _) => e,
        (None, Some(e)) => {
            notes.push(format!(
                "published layout needs {:.1} GiB per GPU by our memory model, more than the {:.0} GiB the GPU has",
                e.memory.total / GIB,
                e.capacity_bytes / GIB
            ));
            e
        }
        (None, None) => {
            return Err(bad_input(
                &format!("runs[{}].layout", run.id),
                "the published layout",
                "a layout the model can split (check tp, pp, batch)",
            ))
        }
    };
    let l = &run.layout;
    let mut choices = BTreeMap::new();
    let mesh = &chosen.mesh;
    choices.insert(
        "attention".into(),
        if training.flash_attention {
            "fused (flash)"
        } else {
            "unfused: the source predates FlashAttention"
        }
        .into(),
    );
    if l.microbatch_size.is_none() {
        choices.insert("microbatch_size".into(), mesh.microbatch_size.to_string());
    }
    if l.virtual_stages.is_none() && l.pp > 1 {
        choices.insert("virtual_stages".into(), mesh.virtual_stages.to_string());
    }
    if l.zero_stage.is_none() {
        choices.insert("zero_stage".into(), mesh.zero_stage.to_string());
    }
    if l.recompute.is_none() {
        choices.insert("recompute".into(), mesh.recompute.to_string());
    }
    if l.sequence_parallel.is_none() {
        choices.insert(
            "sequence_parallel".into(),
            mesh.sequence_parallel.to_string(),
        );
    }
    let observed = run.observed.iteration_time_s;
    Ok(RunPrediction {
        id: run.id.clone(),
        group: run.group.clone(),
        predicted_iteration_time_s: chosen.step_time_s,
        observed_iteration_time_s: observed,
        predicted_tokens_per_s: chosen.tokens_per_s,
        observed_tokens_per_s: training.tokens_per_step() / observed,
        error: chosen.step_time_s / observed - 1.0,
        memory_per_gpu_bytes: chosen.memory.total,
        choices,
        notes,
    })
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Predicts every run and scores the result.
pub fn validate(file: &RunsFile, efficiency: &Efficiency) -> Result<Validation, TunerError> {
    let runs = file
        .runs
        .iter()
        .map(|r| predict(r, efficiency))
        .collect::<Result<Vec<_>, _>>()?;
    let abs: Vec<f64> = runs.iter().map(|r| r.error.abs()).collect();
    let mut groups: BTreeMap<&str, Vec<&RunPrediction>> = BTreeMap::new();
    for r in &runs {
        groups.entry(r.group.as_str()).or_default().push(r);
    }
    let groups = groups
        .into_iter()
        .map(|(g, rs)| GroupSummary {
            group: g.to_string(),
            runs: rs.len(),
            median_abs_error: median(rs.iter().map(|r| r.error.abs()).collect()),
            spearman: (rs.len() >= 3).then(|| {
                spearman(
                    &rs.iter()
                        .map(|r| r.predicted_tokens_per_s)
                        .collect::<Vec<_>>(),
                    &rs.iter()
                        .map(|r| r.observed_tokens_per_s)
                        .collect::<Vec<_>>(),
                )
            }),
        })
        .collect();
    let summary = Summary {
        runs: runs.len(),
        median_abs_error: median(abs.clone()),
        max_abs_error: abs.iter().cloned().fold(0.0, f64::max),
        within_10pct: abs.iter().filter(|&&e| e <= 0.10).count(),
        groups,
        constant_mfu_baseline: baseline(file)?,
    };
    Ok(Validation { runs, summary })
}

/// The constant-MFU baseline: step = model FLOPs / (GPUs x peak x MFU), with the one MFU that
/// minimises the median |error| over the file.
fn baseline(file: &RunsFile) -> Result<Baseline, TunerError> {
    let mut ideal = Vec::with_capacity(file.runs.len());
    for run in &file.runs {
        let shape = run.shape()?;
        let gpu = catalog::gpu(&run.cluster.gpu)?;
        let tokens = f64::from(run.layout.global_batch_size) * f64::from(shape.seq_len);
        // Time at MFU = 1, and what was observed.
        ideal.push((
            shape.model_flops_per_token() * tokens / (f64::from(run.cluster.gpus) * gpu.bf16_flops),
            run.observed.iteration_time_s,
        ));
    }
    let score = |mfu: f64| {
        median(
            ideal
                .iter()
                .map(|(t1, obs)| (t1 / mfu / obs - 1.0).abs())
                .collect(),
        )
    };
    let mfu = (100..=800)
        .map(|i| f64::from(i) / 1000.0)
        .min_by(|a, b| score(*a).total_cmp(&score(*b)))
        .unwrap_or(0.5);
    Ok(Baseline {
        mfu,
        median_abs_error: score(mfu),
        max_abs_error: ideal
            .iter()
            .map(|(t1, obs)| (t1 / mfu / obs - 1.0).abs())
            .fold(0.0, f64::max),
    })
}

/// Median of a sample; 0 for an empty one.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Spearman rank correlation, with tied values given their average rank.
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    let mean = (n + 1.0) / 2.0;
    let cov: f64 = ra
        .iter()
        .zip(&rb)
        .map(|(x, y)| (x - mean) * (y - mean))
        .sum();
    let va: f64 = ra.iter().map(|x| (x - mean).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mean).powi(2)).sum();
    if va == 0.0 || vb == 0.0 {
        0.0
    } else {
        cov / (va * vb).sqrt()
    }
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_known_ranks() {
        assert_eq!(
            spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]),
            1.0
        );
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), -1.0);
        // Classic example: d² = 0+1+1+0+... -> 1 - 6·Σd²/(n(n²-1)).
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 1.0, 4.0, 3.0, 5.0]);
        assert!((rho - (1.0 - 6.0 * 4.0 / 120.0)).abs() < 1e-12);
    }

    #[test]
    fn flash_attention_by_publication_date() {
        assert!(!used_flash_attention(
            "Narayanan et al. 2021, arXiv:2104.04473 (SC'21)"
        ));
        assert!(!used_flash_attention(
            "Korthikanti et al. 2022, arXiv:2205.05198 (MLSys 2023)"
        ));
        assert!(used_flash_attention("Dao 2023, arXiv:2307.08691"));
        assert!(used_flash_attention(
            "MosaicML llm-foundry benchmarking README (2024)"
        ));
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
