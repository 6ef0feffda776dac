//! Predicting published runs: read runs files (format 1, `data/*.yaml`), price each run's
//! published layout, choose the unpublished knobs as a careful user of its framework would
//! (its framework's defaults where they fit, else the fastest layout that fits: `knobs`), and
//! score the predictions.
//! A run that cannot be priced is reported with the reason; the rest are scored.

mod choices;
pub mod fitting;
mod knobs;
pub mod measured;
pub mod summary;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{self, Cluster, Efficiency};
use crate::cost::Scenario;
use crate::error::{bad_input, TunerError};
use crate::mesh::{Framework, Mesh, Precision, Recompute, Training};
use crate::model::{FfnAct, Mla, ModelShape, Moe};
use crate::search::{Constraints, ExpertSplit};
pub use crate::stats::{median, spearman};
pub use choices::Choice;
pub use summary::{Bucket, Summary};

/// A runs file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsFile {
    /// Format version; 1 is the only one.
    pub format: u32,
    /// The runs.
    pub runs: Vec<Run>,
    /// Where the file was read from, for reports.
    #[serde(skip)]
    pub origin: String,
}

/// One published run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// What the source says that no field holds, and how derived figures were derived.
    #[serde(default)]
    pub notes: Option<String>,
}

/// Model shape as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
#[serde(deny_unknown_fields)]
pub struct RunModel {
    pub name: String,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: Option<u32>,
    /// Where a head is not hidden / heads wide (an extension of format 1; see `docs/design.md`).
    #[serde(default)]
    pub head_dim: Option<u32>,
    pub ffn_hidden: Option<u32>,
    pub ffn_act: FfnAct,
    pub vocab: u32,
    pub seq_len: u32,
    pub tied_embeddings: bool,
    #[serde(default)]
    pub moe: Option<Moe>,
    /// Multi-head latent attention, as DeepSeek's `config.json` names its widths (an
    /// extension of format 1).
    #[serde(default)]
    pub mla: Option<Mla>,
    /// Multi-token-prediction modules (`num_nextn_predict_layers`; an extension of format 1).
    #[serde(default)]
    pub mtp_layers: u32,
    /// Positions a sliding-window layer attends to (Hugging Face's `sliding_window`; an
    /// extension of format 1).
    #[serde(default)]
    pub sliding_window: Option<u32>,
    /// The layers that slide (Hugging Face's `layer_types`; an extension of format 1).
    #[serde(default)]
    pub layer_types: Option<Vec<crate::model::AttentionType>>,
    /// An RMSNorm over each query and key head (Qwen3's; an extension of format 1); absent,
    /// the catalog model of the same dimensions decides ([`choices::qk_norm`]).
    #[serde(default)]
    pub qk_norm: Option<bool>,
}

/// Cluster as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
#[serde(deny_unknown_fields)]
pub struct RunCluster {
    pub gpu: String,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub nics_per_node: u32,
    pub nic_gbps: f64,
    /// The scale-out fabric as the source names it (`infiniband`, `roce`, ...), for readers.
    #[serde(default)]
    pub fabric: Option<String>,
    /// GPUs sharing one NVLink fabric where it spans more than a node (a GB200 NVL72 rack: 72
    /// over 4-GPU trays; an extension of format 1); absent: the node, or 1 on a GPU without
    /// NVLink.
    #[serde(default)]
    pub nvlink_domain: Option<u32>,
    /// Measurement files or directories of this run's own cluster, relative to the runs file
    /// (an extension of format 1): the run is priced from them beside the catalog.
    #[serde(default)]
    pub measurements: Vec<String>,
}

/// What attention kernel a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// Fused (FlashAttention and its kin): the s x s scores never reach HBM.
    Flash,
    /// Unfused: scores written, soft-maxed and read back through HBM.
    Unfused,
}

/// Layout as a runs file writes it.
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
#[serde(deny_unknown_fields)]
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
    pub schedule: Option<Schedule>,
    /// Layers on the first pipeline stage where it differs from the rest (an extension of
    /// format 1; Megatron's `--decoder-first-pipeline-num-layers`).
    #[serde(default)]
    pub first_stage_layers: Option<u32>,
    /// Layers on the last pipeline stage where it differs from the rest (an extension of
    /// format 1; Megatron's `--decoder-last-pipeline-num-layers`).
    #[serde(default)]
    pub last_stage_layers: Option<u32>,
    #[serde(default)]
    pub precision: Option<Precision>,
    #[serde(default)]
    pub attention: Option<Attention>,
    #[serde(default)]
    pub overlap_grad_reduce: Option<bool>,
    /// Whether torch.compile ran (torchtitan, Hugging Face stacks); absent: read the notes.
    #[serde(default)]
    pub torch_compile: Option<bool>,
    /// Tensor-parallel ranks each expert splits over (Megatron's
    /// `expert_tensor_parallel_size`; an extension of format 1); absent: the recipe family's
    /// or framework's default.
    #[serde(default)]
    pub etp: Option<u32>,
}

/// A pipeline schedule as a runs file names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Schedule {
    /// One forward, one backward per stage (PipeDream-Flush; Narayanan et al. 2021 §2.2.1).
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// 1F1B over virtual stages (Narayanan et al. 2021 §2.2.2).
    #[serde(rename = "interleaved")]
    Interleaved,
    /// DeepSeek-V3's bidirectional pipeline ([`crate::mesh::Schedule::Dualpipe`]; an
    /// extension of format 1).
    #[serde(rename = "dualpipe")]
    Dualpipe,
    /// Megatron-Core's combined 1F1B ([`crate::mesh::Schedule::Combined1F1B`]; an extension
    /// of format 1), interleaved where the run has a pipeline.
    #[serde(rename = "combined-1f1b")]
    Combined1F1B,
}

/// Measurements of a run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    /// Seconds per iteration.
    pub iteration_time_s: f64,
    /// Tokens per second, whole job, as published or derived (for readers).
    #[serde(default)]
    pub tokens_per_s: Option<f64>,
    /// The source's own model FLOPs utilisation (for readers).
    #[serde(default)]
    pub mfu: Option<f64>,
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
    /// The publication the run comes from (the group's first word), for leave-one-source-out.
    pub source: String,
    /// The runs file it was read from.
    pub file: String,
    /// GPU catalog id it was priced on: the runs file's, or the part its notes name.
    pub gpu: String,
    /// GPUs of the run.
    pub gpus: u32,
    /// Framework priced.
    pub framework: Framework,
    /// GEMM precision priced.
    pub precision: Precision,
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
    /// Seconds per iteration at 100% MFU (model FLOPs over the GPUs' bf16 peak), for the
    /// constant-MFU baseline.
    pub ideal_iteration_time_s: f64,
    /// Memory per GPU the cost model predicts for the chosen layout, bytes.
    pub memory_per_gpu_bytes: f64,
    /// The predicted step time term by term.
    pub breakdown: crate::cost::timing::Breakdown,
    /// Knobs the file left null and what was chosen for them.
    pub choices: BTreeMap<Choice, String>,
    /// Notes, such as a layout our memory model says does not fit.
    pub notes: Vec<String>,
    /// The same run priced from its cluster's measurements, when validate was given any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<measured::MeasuredPrediction>,
    /// Why the run has no measured price, when validate was given measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_measurements: Option<String>,
}

/// Nominal against measured pricing over the runs priced both ways.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredSummary {
    /// Runs priced both ways.
    pub runs: usize,
    /// Runs without measurements, priced nominal only.
    pub without: usize,
    /// Nominal scores over the runs priced both ways.
    pub nominal: Summary,
    /// Measured scores over the same runs.
    pub measured: Summary,
    /// What priced each class of kernel and collective, with the number of runs so priced.
    pub priced_from: Vec<(String, usize)>,
    /// What the measurement files said or lacked.
    pub notes: Vec<String>,
}

/// A run that could not be priced, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Run id.
    pub id: String,
    /// The runs file it was read from.
    pub file: String,
    /// Why it was not priced.
    pub reason: String,
}

/// The whole validation report.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    /// One entry per priced run.
    pub runs: Vec<RunPrediction>,
    /// Runs that could not be priced.
    pub skipped: Vec<Skipped>,
    /// Scores.
    pub summary: Summary,
    /// The fitted efficiencies this validation used.
    pub fitted: Vec<(String, f64)>,
    /// Nominal against measured, when validate was given measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredSummary>,
}

/// Shortest training step a run may state, s: 0.1 ms, under one layer's kernel launches; a step
/// of 1e-308 s was fitted and moved every knob (issue 31, item 10).
const MIN_ITERATION_TIME_S: f64 = 1e-4;

/// Longest training step a run may state, s: 10^5 s (28 h), past any published step.
const MAX_ITERATION_TIME_S: f64 = 1e5;

/// Reads and parses runs files (format 1), each through the runs file bound.
pub fn read_runs(paths: &[std::path::PathBuf]) -> Result<Vec<RunsFile>, TunerError> {
    let files = paths
        .iter()
        .map(|p| {
            let text = crate::input::read_text(p, crate::input::RUNS)?;
            parse_runs(&text, &p.display().to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    distinct_ids(&files)?;
    Ok(files)
}

/// Refuses a run id that two files (or one file given twice) share: the run would be scored
/// twice and weigh double in every median (issue 31).
fn distinct_ids(files: &[RunsFile]) -> Result<(), TunerError> {
    let mut first_in = std::collections::BTreeMap::new();
    for file in files {
        for run in &file.runs {
            if let Some(earlier) = first_in.insert(run.id.as_str(), file.origin.as_str()) {
                let which = if earlier == file.origin {
                    "the file is given twice".to_string()
                } else {
                    format!("`{earlier}` has it")
                };
                return Err(bad_input(
                    &format!("{}: runs[{}].id", file.origin, run.id),
                    &run.id,
                    &format!("an id no earlier runs file has ({which})"),
                ));
            }
        }
    }
    Ok(())
}

/// Parses a runs file; `origin` names it in errors and reports.
pub fn parse_runs(text: &str, origin: &str) -> Result<RunsFile, TunerError> {
    let mut file: RunsFile = crate::input::yaml(text, origin, crate::input::RUNS)?;
    if file.format != 1 {
        return Err(bad_input("format", file.format, "1"));
    }
    // A run is its id: two runs of one id would pair one's price with the other's.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(run) = file.runs.iter().find(|r| !seen.insert(r.id.as_str())) {
        return Err(bad_input(
            &format!("{origin}: runs[{}].id", run.id),
            &run.id,
            "an id no other run of the file has",
        ));
    }
    file.origin = origin.to_string();
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
            head_dim: m.head_dim,
            ffn_hidden: match m.ffn_hidden {
                Some(f) => f,
                None => m.hidden.checked_mul(4).ok_or_else(|| {
                    bad_input(
                        &format!("runs[{}].model.hidden", self.id),
                        m.hidden,
                        "at most 1073741823 where ffn_hidden is left out (4 x hidden)",
                    )
                })?,
            },
            ffn_act: m.ffn_act,
            vocab: m.vocab,
            seq_len: m.seq_len,
            tied_embeddings: m.tied_embeddings,
            moe: m.moe.clone(),
            mla: m.mla.clone(),
            mtp_layers: m.mtp_layers,
            sliding_window: m.sliding_window,
            layer_types: m.layer_types.clone(),
            qk_norm: m.qk_norm.unwrap_or(false),
        };
        shape.validate()?;
        Ok(shape)
    }

    /// The cluster, on the GPU `gpu_id` names.
    fn cluster(&self, gpu_id: &str) -> Result<Cluster, TunerError> {
        let gpu = catalog::gpu(gpu_id)?.clone();
        let nvlink_domain = self
            .cluster
            .nvlink_domain
            .unwrap_or(if gpu.nvlink_bytes_per_s > 0.0 {
                self.cluster.gpus_per_node
            } else {
                1
            });
        let cluster = Cluster {
            name: format!("{} x{}", gpu.id, self.cluster.gpus),
            gpu,
            gpus_per_node: self.cluster.gpus_per_node,
            nvlink_domain,
            nics_per_node: self.cluster.nics_per_node,
            nic_bits_per_s: self.cluster.nic_gbps * 1e9,
        };
        // The same checks as the CLI's flags, named by the runs file's keys.
        cluster.check(self.cluster.gpus, |field| {
            format!("runs[{}].cluster.{field}", self.id)
        })?;
        Ok(cluster)
    }

    /// The publication a run comes from: its group's first word (`torchtitan`, `vtrain`,
    /// `mosaicml`, ...). Leave-one-source-out holds these out one at a time.
    pub fn source_key(&self) -> String {
        self.group
            .split('-')
            .next()
            .unwrap_or(&self.group)
            .to_string()
    }

    /// The constraints the published layout fixes, and the framework defaults it leaves in
    /// force.
    fn constraints(&self, framework: Framework) -> Constraints {
        let l = &self.layout;
        let interleaved = matches!(
            l.schedule,
            Some(Schedule::Interleaved | Schedule::Combined1F1B)
        ) && l.pp > 1;
        // An interleaved schedule without a published split: torchtitan's
        // `generate_split_points` then builds 2 stages per rank ("the default if no pipeline
        // split is specified"); Megatron has no default (its interleaving needs
        // --num-layers-per-virtual-pipeline-stage), so the search picks.
        let default_virtual = match (interleaved, framework) {
            (true, Framework::Fsdp) => Some(TORCHTITAN_STAGES_PER_RANK),
            (true, _) => None,
            (false, _) => Some(1),
        };
        Constraints {
            tp: Some(l.tp),
            pp: Some(l.pp),
            dp: Some(l.dp),
            cp: Some(l.cp.unwrap_or(1)),
            ep: Some(l.ep.unwrap_or(1)),
            microbatch_size: l.microbatch_size,
            microbatches: None,
            virtual_stages: l.virtual_stages.or(default_virtual),
            zero_stage: l.zero_stage,
            recompute: l.recompute,
            sequence_parallel: l.sequence_parallel,
            schedule: Some(match l.schedule {
                Some(Schedule::Dualpipe) => crate::mesh::Schedule::Dualpipe,
                Some(Schedule::Combined1F1B) => crate::mesh::Schedule::Combined1F1B,
                _ => crate::mesh::Schedule::OneFOneB,
            }),
            first_stage_layers: l.first_stage_layers,
            last_stage_layers: l.last_stage_layers,
            // Left out: the recipe's whole experts, else the framework's; never searched.
            etp: Some(l.etp.unwrap_or(if choices::folded_experts(self) {
                1
            } else {
                ExpertSplit::of(framework).default_etp(l.tp, l.ep.unwrap_or(1))
            })),
            expert_split: Default::default(),
        }
    }
}

/// Predicts one run from the catalog.
pub fn predict(run: &Run, efficiency: &Efficiency) -> Result<RunPrediction, TunerError> {
    price(run, efficiency, &Scenario::nominal).map(|(p, _, _)| p)
}

/// Builds the scenario a run is priced in: the catalog's, or measured.
pub(crate) type Build<'a> = dyn Fn(ModelShape, Training, Cluster, u32, Efficiency) -> Scenario + 'a;

/// Prices one run in the scenario `build` makes, with the scenario and the chosen mesh.
pub(crate) fn price(
    run: &Run,
    efficiency: &Efficiency,
    build: &Build,
) -> Result<(RunPrediction, Scenario, Mesh), TunerError> {
    let mut shape = run.shape()?;
    let part = choices::gpu_named_in_notes(run);
    let gpu_id = part.unwrap_or(&run.cluster.gpu);
    let cluster = run.cluster(gpu_id)?;
    let (training, mut choices) = choices::training(run, cluster.gpu.arch);
    if let Some(id) = part {
        choices.insert(Choice::Gpu, format!("{id} (the part the notes name)"));
    }
    if let (None, Some(why)) = (run.model.qk_norm, choices::qk_norm(&shape)) {
        shape.qk_norm = true;
        choices.insert(Choice::QkNorm, why);
    }
    let gpus = run.cluster.gpus;
    let c = run.constraints(training.framework);
    let l = &run.layout;
    if let Some(z) = l.zero_stage.filter(|&z| z > 3) {
        return Err(bad_input(
            &format!("runs[{}].layout.zero_stage", run.id),
            z,
            "0, 1, 2 or 3",
        ));
    }
    // In 128 bits: four 32-bit degrees cannot wrap past the GPU count.
    let product = [l.tp, l.pp, l.dp, c.cp.unwrap_or(1)]
        .map(u128::from)
        .iter()
        .product::<u128>();
    if product != u128::from(gpus) {
        return Err(bad_input(
            &format!("runs[{}].layout", run.id),
            format!("tp x pp x dp x cp = {product}"),
            &format!("cluster.gpus = {gpus}"),
        ));
    }
    if l.etp.is_none() && choices::folded_experts(run) {
        choices.insert(
            Choice::Etp,
            "1 (the recipe's expert_tensor_parallel_size)".into(),
        );
    }
    let mut efficiency = efficiency.clone();
    if choices::forced_balance(run) {
        efficiency.moe_imbalance = 1.0;
        choices.insert(
            Choice::MoeBalance,
            "forced (the recipe's moe_router_force_load_balancing)".into(),
        );
    }
    let scenario = build(shape, training.clone(), cluster, gpus, efficiency);
    let mut notes = Vec::new();
    let unsaid = choices::unsaid(run, training.framework);
    let chosen = knobs::published_mesh(run, &scenario, &c, &unsaid, &mut notes, &mut choices)?;
    let observed = run.observed.iteration_time_s;
    if !(MIN_ITERATION_TIME_S..=MAX_ITERATION_TIME_S).contains(&observed) {
        return Err(bad_input(
            &format!("runs[{}].observed.iteration_time_s", run.id),
            observed,
            &format!("a step time from {MIN_ITERATION_TIME_S:e} s to {MAX_ITERATION_TIME_S:e} s"),
        ));
    }
    let mesh = chosen.mesh;
    let prediction = RunPrediction {
        id: run.id.clone(),
        group: run.group.clone(),
        source: run.source_key(),
        file: String::new(),
        gpu: gpu_id.to_string(),
        gpus,
        framework: training.framework,
        precision: training.precision,
        predicted_iteration_time_s: chosen.step_time_s,
        observed_iteration_time_s: observed,
        predicted_tokens_per_s: chosen.tokens_per_s,
        observed_tokens_per_s: training.tokens_per_step() / observed,
        error: chosen.step_time_s / observed - 1.0,
        ideal_iteration_time_s: scenario.model.model_flops_per_token() * training.tokens_per_step()
            / (f64::from(gpus) * scenario.cluster.gpu.bf16_flops),
        memory_per_gpu_bytes: chosen.memory.total,
        breakdown: chosen.breakdown,
        choices,
        notes,
        measured: None,
        no_measurements: None,
    };
    Ok((prediction, scenario, mesh))
}

/// Stages per rank of torchtitan's looped pipeline schedules when the job names no split
/// points (torchtitan `parallelisms/pipeline_llama.py`, `generate_split_points`, 2024-12).
const TORCHTITAN_STAGES_PER_RANK: u32 = 2;

/// Predicts every run of every file and scores the result; a run that cannot be priced is
/// listed in `skipped` with the reason.
pub fn validate(files: &[RunsFile], efficiency: &Efficiency) -> Validation {
    let (runs, skipped) = predict_all(files, efficiency);
    let summary = summary::summarize(&runs);
    Validation {
        runs,
        skipped,
        summary,
        fitted: fitting::fitted_values(efficiency),
        measured: None,
    }
}

/// [`validate`], and every run priced again from the measurements `serving` holds for it.
pub fn validate_measured(
    files: &[RunsFile],
    efficiency: &Efficiency,
    serving: &mut measured::Serving,
) -> Validation {
    let mut v = validate(files, efficiency);
    let by_id: BTreeMap<(&str, &str), (&RunsFile, &Run)> = files
        .iter()
        .flat_map(|f| {
            f.runs
                .iter()
                .map(move |r| ((f.origin.as_str(), r.id.as_str()), (f, r)))
        })
        .collect();
    let mut served = std::collections::BTreeSet::new();
    let mut priced_from: BTreeMap<String, usize> = BTreeMap::new();
    for p in &mut v.runs {
        let Some((file, run)) = by_id.get(&(p.file.as_str(), p.id.as_str())) else {
            continue;
        };
        match serving.price(file, run, p, efficiency) {
            measured::Served::Priced(m) => {
                served.extend(m.measurements.iter().cloned());
                for line in &m.priced_from_summary {
                    *priced_from.entry(line.clone()).or_default() += 1;
                }
                p.measured = Some(*m);
            }
            measured::Served::Without(why) => p.no_measurements = Some(why),
        }
    }
    let both: Vec<RunPrediction> = v
        .runs
        .iter()
        .filter(|r| r.measured.is_some())
        .cloned()
        .collect();
    let as_measured: Vec<RunPrediction> = both
        .iter()
        .map(|r| {
            let m = r.measured.as_ref().expect("filtered");
            RunPrediction {
                predicted_iteration_time_s: m.predicted_iteration_time_s,
                predicted_tokens_per_s: r.predicted_tokens_per_s * r.predicted_iteration_time_s
                    / m.predicted_iteration_time_s,
                error: m.error,
                ..r.clone()
            }
        })
        .collect();
    let mut notes = serving.set_notes();
    notes.extend(serving.unused(&served));
    let mut lines: Vec<(String, usize)> = priced_from.into_iter().collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.measured = Some(MeasuredSummary {
        runs: both.len(),
        without: v.runs.len() - both.len(),
        nominal: summary::summarize(&both),
        measured: summary::summarize(&as_measured),
        priced_from: lines,
        notes,
    });
    v
}

/// Predicts every run of every file, without the summaries: the fit's objective needs only
/// the errors, and summarizing (the baseline MFU's search above all) cost it four fifths of
/// its time.
pub(crate) fn predict_all(
    files: &[RunsFile],
    efficiency: &Efficiency,
) -> (Vec<RunPrediction>, Vec<Skipped>) {
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for file in files {
        for run in &file.runs {
            match predict(run, efficiency) {
                Ok(mut p) => {
                    p.file.clone_from(&file.origin);
                    runs.push(p);
                }
                Err(e) => skipped.push(Skipped {
                    id: run.id.clone(),
                    file: file.origin.clone(),
                    reason: e.to_string(),
                }),
            }
        }
    }
    (runs, skipped)
}
