//! Jobs from logs: the training logs a cluster already has (Megatron-LM and
//! Megatron-DeepSpeed, NeMo and Megatron-Bridge, torchtitan, DeepSpeed) turned into runs of
//! the runs format (format 1, what `tuner validate --runs` reads), so that the cluster's own
//! jobs can calibrate the model.
//!
//! One reader per log family ([`megatron`], [`nemo`], [`torchtitan`], [`deepspeed`]) fills a
//! [`Job`]: each field the log states with the line that states it, the per-iteration figures
//! it prints, and the lines it could not use. This module holds what they share: which
//! family a log is ([`read_log`]), the steady-state rule ([`warmup_lines`], [`steady_state`]),
//! the flags that fill what a log lacks ([`Overrides`]) and format 1 out ([`to_run`],
//! [`render`]). What a log does not state stays `null`, with a note naming it; a run with a
//! `null` that format 1 needs parses only once it is filled in.

pub mod deepspeed;
mod lines;
pub mod megatron;
pub mod nemo;
pub mod torchtitan;

use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::error::{bad_input, TunerError};
use crate::mesh::{Precision, Recompute};
use crate::model::{FfnAct, Moe};
use crate::validate::{median, Attention};

/// The most of a log read: a run of a few hundred thousand iterations logs tens of MB; cut a
/// larger one to its head and tail (`head -c`, `tail -c`) first.
pub const LOG_BYTES: u64 = 512 << 20;

/// A log family: who printed the log, which decides how it is read and which framework
/// `tuner validate` prices (it reads the family's name in the run's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// NVIDIA Megatron-LM (`pretrain_gpt.py`), or a fork that keeps its log lines.
    MegatronLm,
    /// Megatron-DeepSpeed: Megatron's lines, DeepSpeed's engine.
    MegatronDeepspeed,
    /// Megatron-Bridge: Megatron's iteration lines, its own configuration summary.
    MegatronBridge,
    /// NeMo (1.x Lightning progress bars and 2.x `Training epoch` lines).
    Nemo,
    /// torchtitan.
    Torchtitan,
    /// DeepSpeed without Megatron.
    Deepspeed,
}

impl Family {
    /// The family's name, as the runs file's `source` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Family::MegatronLm => "Megatron-LM",
            Family::MegatronDeepspeed => "Megatron-DeepSpeed",
            Family::MegatronBridge => "Megatron-Bridge",
            Family::Nemo => "NeMo",
            Family::Torchtitan => "torchtitan",
            Family::Deepspeed => "DeepSpeed",
        }
    }
}

/// A value a log states, and the line that states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stated<T> {
    /// The value.
    pub value: T,
    /// 1-based line number.
    pub line: usize,
}

/// Sets `slot` to `value` from `line` unless an earlier statement set it: readers call the
/// most trustworthy source first (Megatron's arguments before its iteration lines).
pub fn state<T>(slot: &mut Option<Stated<T>>, value: T, line: usize) {
    if slot.is_none() {
        *slot = Some(Stated { value, line });
    }
}

/// The model shape a log states.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct ModelFacts {
    pub name: Option<Stated<String>>,
    pub layers: Option<Stated<u32>>,
    pub hidden: Option<Stated<u32>>,
    pub heads: Option<Stated<u32>>,
    pub kv_heads: Option<Stated<u32>>,
    pub head_dim: Option<Stated<u32>>,
    pub ffn_hidden: Option<Stated<u32>>,
    pub ffn_act: Option<Stated<FfnAct>>,
    pub vocab: Option<Stated<u32>>,
    pub seq_len: Option<Stated<u32>>,
    pub tied_embeddings: Option<Stated<bool>>,
    /// `Some(None)`: stated dense.
    pub moe: Option<Stated<Option<Moe>>>,
}

/// The cluster a log states.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct ClusterFacts {
    /// A catalog GPU id.
    pub gpu: Option<Stated<String>>,
    pub gpus: Option<Stated<u32>>,
    pub gpus_per_node: Option<Stated<u32>>,
    pub nics_per_node: Option<Stated<u32>>,
    pub nic_gbps: Option<Stated<f64>>,
}

/// The parallel layout and training settings a log states.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct LayoutFacts {
    pub tp: Option<Stated<u32>>,
    pub pp: Option<Stated<u32>>,
    pub dp: Option<Stated<u32>>,
    pub ep: Option<Stated<u32>>,
    pub cp: Option<Stated<u32>>,
    pub virtual_stages: Option<Stated<u32>>,
    pub microbatch_size: Option<Stated<u32>>,
    pub global_batch_size: Option<Stated<u32>>,
    pub zero_stage: Option<Stated<u8>>,
    pub recompute: Option<Stated<Recompute>>,
    pub sequence_parallel: Option<Stated<bool>>,
    pub precision: Option<Stated<Precision>>,
    pub attention: Option<Stated<Attention>>,
    pub overlap_grad_reduce: Option<Stated<bool>>,
    pub torch_compile: Option<Stated<bool>>,
}

/// What a log's per-iteration figure measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Seconds per iteration (Megatron's milliseconds are converted by its reader).
    Seconds,
    /// Tokens per second per GPU (torchtitan's `tps`): a step takes global batch tokens over
    /// tps x GPUs.
    TokensPerGpuPerSecond,
    /// Samples (sequences) per second of the whole job (DeepSpeed's `CurrSamplesPerSec`): a
    /// step takes `train_batch_size` over it.
    SamplesPerSecond,
}

/// One iteration line.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The iteration (or step) number the line gives.
    pub number: u64,
    /// The figure, in the unit [`Job::measure`] says.
    pub value: f64,
    /// 1-based line number.
    pub line: usize,
    /// The rank a launcher prefix names, if any.
    pub rank: Option<u32>,
    /// The framework's own TFLOP/s per GPU on that line, if it prints one.
    pub tflops: Option<f64>,
    /// The global batch (sequences) the line states, if it does (Megatron's batch ramp-up).
    pub batch: Option<u32>,
}

/// A log as one reader read it: what it states, its iteration figures, what it could not use.
#[derive(Debug, Clone)]
pub struct Job {
    /// Who printed it.
    pub family: Family,
    /// The first date stamped in it.
    pub date: Option<String>,
    /// Model shape.
    pub model: ModelFacts,
    /// Cluster.
    pub cluster: ClusterFacts,
    /// Layout.
    pub layout: LayoutFacts,
    /// Iteration lines, in file order.
    pub steps: Vec<Step>,
    /// What [`Step::value`] measures.
    pub measure: Measure,
    /// The figure as the log names it (`elapsed time per iteration (ms)`).
    pub figure: &'static str,
    /// Whether each line averages the iterations since the line before (a log interval).
    pub averaged: bool,
    /// Which FLOP count the framework's TFLOP/s uses, where it prints one.
    pub tflops_kind: Option<&'static str>,
    /// How fields were read or inferred.
    pub notes: Vec<String>,
    /// Lines that looked like iteration lines but could not be used, as `line N: why`.
    pub skipped: Vec<String>,
}

impl Job {
    /// Keeps step `number`'s figure from `line` where the line has a positive one, else says
    /// the line was cut short before its `what`.
    pub(crate) fn step(&mut self, s: Step, value: Option<f64>, what: &str) {
        match value.filter(|v| *v > 0.0) {
            Some(value) => self.steps.push(Step { value, ..s }),
            None => self.skipped.push(format!(
                "line {}: step {} without a positive {what} (the line is cut short)",
                s.line, s.number
            )),
        }
    }

    /// An empty job of `family` whose iteration lines print `figure`, measured as `measure`.
    pub fn new(family: Family, measure: Measure, figure: &'static str) -> Job {
        Job {
            family,
            date: None,
            model: ModelFacts::default(),
            cluster: ClusterFacts::default(),
            layout: LayoutFacts::default(),
            steps: Vec::new(),
            measure,
            figure,
            averaged: false,
            tflops_kind: None,
            notes: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// The fields the log states, as `field = value (line N)`, for reports and tests.
    pub fn found(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut add = |name: &str, v: Option<(String, usize)>| {
            if let Some((v, line)) = v {
                out.push(format!("{name} = {v} (line {line})"));
            }
        };
        fn s<T: std::fmt::Debug>(x: &Option<Stated<T>>) -> Option<(String, usize)> {
            x.as_ref().map(|x| (format!("{:?}", x.value), x.line))
        }
        let m = &self.model;
        add("model.name", s(&m.name));
        add("model.layers", s(&m.layers));
        add("model.hidden", s(&m.hidden));
        add("model.heads", s(&m.heads));
        add("model.kv_heads", s(&m.kv_heads));
        add("model.head_dim", s(&m.head_dim));
        add("model.ffn_hidden", s(&m.ffn_hidden));
        add("model.ffn_act", s(&m.ffn_act));
        add("model.vocab", s(&m.vocab));
        add("model.seq_len", s(&m.seq_len));
        add("model.tied_embeddings", s(&m.tied_embeddings));
        add("model.moe", s(&m.moe));
        let c = &self.cluster;
        add("cluster.gpu", s(&c.gpu));
        add("cluster.gpus", s(&c.gpus));
        add("cluster.gpus_per_node", s(&c.gpus_per_node));
        add("cluster.nics_per_node", s(&c.nics_per_node));
        add("cluster.nic_gbps", s(&c.nic_gbps));
        let l = &self.layout;
        add("layout.tp", s(&l.tp));
        add("layout.pp", s(&l.pp));
        add("layout.dp", s(&l.dp));
        add("layout.ep", s(&l.ep));
        add("layout.cp", s(&l.cp));
        add("layout.virtual_stages", s(&l.virtual_stages));
        add("layout.microbatch_size", s(&l.microbatch_size));
        add("layout.global_batch_size", s(&l.global_batch_size));
        add("layout.zero_stage", s(&l.zero_stage));
        add("layout.recompute", s(&l.recompute));
        add("layout.sequence_parallel", s(&l.sequence_parallel));
        add("layout.precision", s(&l.precision));
        add("layout.attention", s(&l.attention));
        add("layout.overlap_grad_reduce", s(&l.overlap_grad_reduce));
        add("layout.torch_compile", s(&l.torch_compile));
        out
    }
}

/// Why a log could not become a run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// No line of any family's iteration format (a log of another kind, or one cut before
    /// training began).
    #[error(
        "{file}: no iteration lines (expected Megatron-LM 'elapsed time per iteration (ms)', \
         NeMo 'train_step_timing', torchtitan 'tps', DeepSpeed 'samples/sec'){detail}"
    )]
    NoIterations {
        /// The file.
        file: String,
        /// `; line N: why` for each line that looked like one but was not usable.
        detail: String,
    },
    /// A flag gives a value the log states otherwise.
    #[error("{file}: {flag} {value} contradicts the log: line {line} states {stated} ({what}); leave {flag} out or fix it")]
    Contradicts {
        /// The file.
        file: String,
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// The line that states otherwise.
        line: usize,
        /// What it states.
        stated: String,
        /// The field.
        what: &'static str,
    },
    /// `--warmup` drops every iteration of a log.
    #[error("{file}: --warmup {warmup} drops all {lines} of its iteration lines; give fewer than {lines}")]
    Warmup {
        /// The file.
        file: String,
        /// The flag's value.
        warmup: usize,
        /// Usable iteration lines in the file.
        lines: usize,
    },
    /// A file that does not read.
    #[error(transparent)]
    Input(#[from] TunerError),
}

impl JobError {
    /// Whether the command line is at fault (a flag that contradicts a log, a warm-up longer
    /// than a log), not the log.
    pub fn is_usage(&self) -> bool {
        matches!(self, JobError::Contradicts { .. } | JobError::Warmup { .. })
            || matches!(self, JobError::Input(TunerError::BadInput { .. }))
    }
}

/// Reads `path` within [`LOG_BYTES`]. Bytes that are not UTF-8 become U+FFFD with a note
/// rather than refusing the file: a log cut mid-character or holding a stray binary byte is
/// still a log.
pub fn read_log_file(path: &Path) -> Result<(String, Option<String>), TunerError> {
    let name = path.display().to_string();
    let io = |e: std::io::Error| TunerError::Io {
        path: name.clone(),
        message: e.to_string(),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(LOG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > LOG_BYTES {
        return Err(TunerError::Io {
            path: name,
            message: format!(
                "larger than {} MiB, the most the tuner reads of a training log: cut it to its head and tail",
                LOG_BYTES >> 20
            ),
        });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, None)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            Ok((
                text,
                Some(format!(
                    "not UTF-8 from byte {at}: such bytes read as U+FFFD"
                )),
            ))
        }
    }
}

/// Reads a log of any family: the first reader, in the order Megatron-LM, NeMo, torchtitan,
/// DeepSpeed, that finds a usable iteration line wins (Megatron-DeepSpeed prints both
/// Megatron's time per iteration and DeepSpeed's samples per second; the direct time wins).
pub fn read_log(text: &str, file: &str) -> Result<Job, JobError> {
    let mut detail = String::new();
    let readers: [fn(&str) -> Option<Job>; 4] = [
        megatron::read,
        nemo::read,
        torchtitan::read,
        deepspeed::read,
    ];
    for read in readers {
        let Some(mut job) = read(text) else { continue };
        if job.steps.is_empty() {
            for s in &job.skipped {
                detail.push_str("; ");
                detail.push_str(s);
            }
            continue;
        }
        job.date = lines::first_date(text);
        launcher_facts(text, &mut job);
        return Ok(job);
    }
    Err(JobError::NoIterations {
        file: file.to_string(),
        detail,
    })
}

/// What launchers print, whatever the framework: DeepSpeed's launcher `num_local_procs=8` and
/// `dist_world_size=16`, torchrun's `--nproc_per_node=8` on a command line a script echoes.
fn launcher_facts(text: &str, job: &mut Job) {
    let marks = [
        "num_local_procs=",
        "dist_world_size=",
        "--nproc_per_node",
        "--nproc-per-node",
    ];
    if !marks.iter().any(|m| text.contains(m)) {
        return;
    }
    for line in lines::lines(text) {
        let t = &line.text;
        if !(t.contains('=') || t.contains("--nproc")) {
            continue;
        }
        if let Some(n) = lines::number_after(t, "num_local_procs=").and_then(lines::count) {
            if n > 0 {
                state(&mut job.cluster.gpus_per_node, n, line.number);
            }
        }
        if let Some(n) = lines::number_after(t, "dist_world_size=").and_then(lines::count) {
            if n > 0 {
                state(&mut job.cluster.gpus, n, line.number);
            }
        }
        for flag in ["--nproc_per_node", "--nproc-per-node"] {
            if let Some(n) = lines::number_after(t, flag).and_then(lines::count) {
                if n > 0 {
                    state(&mut job.cluster.gpus_per_node, n, line.number);
                }
            }
        }
    }
}

/// The warm-up rule: of `n` logged iterations, drop the first 10% (rounded up) and at least
/// the first 2, but keep at least one. The first iterations of a job compile kernels, tune
/// NCCL channels, fill allocator caches and (under fp16) skip steps on overflow; two lines
/// cover that in every log read so far, and a tenth covers a longer ramp in a long log
/// without throwing away a short one. 1 line: none dropped; 2: the first; 3: the first 2.
pub fn warmup_lines(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        n.div_ceil(10).max(2).min(n - 1)
    }
}

/// The steady state of a job: the median seconds per iteration over the lines kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    /// Median seconds per iteration.
    pub median_s: f64,
    /// Lines kept.
    pub kept: usize,
    /// Lines dropped as warm-up.
    pub dropped: usize,
    /// Iteration numbers of the first and last line kept.
    pub kept_range: (u64, u64),
    /// Iteration numbers of the first and last line dropped, if any.
    pub dropped_range: Option<(u64, u64)>,
}

/// Drops the warm-up from `times` (iteration number, seconds; sorted by iteration) and takes
/// the median of the rest: the median, not the mean, because checkpoint saves, evaluations and
/// stragglers put a few long iterations into every log. `warmup` replaces
/// [`warmup_lines`]'s count; `None` when nothing would be left.
pub fn steady_state(times: &[(u64, f64)], warmup: Option<usize>) -> Option<SteadyState> {
    let dropped = warmup.unwrap_or_else(|| warmup_lines(times.len()));
    let kept = times.get(dropped..).filter(|k| !k.is_empty())?;
    Some(SteadyState {
        median_s: median(kept.iter().map(|t| t.1).collect()),
        kept: kept.len(),
        dropped,
        kept_range: (kept[0].0, kept[kept.len() - 1].0),
        dropped_range: (dropped > 0).then(|| (times[0].0, times[dropped - 1].0)),
    })
}

/// What the command line fills in where a log is silent. Each is checked by
/// [`Overrides::check`]; where a log states a value and a flag contradicts it, [`to_run`]
/// refuses naming both.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--gpu`: a catalog GPU id.
    pub gpu: Option<String>,
    /// `--gpus`: GPUs of the job.
    pub gpus: Option<u32>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<u32>,
    /// `--nics-per-node`.
    pub nics_per_node: Option<u32>,
    /// `--nic-gbps`: line rate of one NIC, Gbit/s.
    pub nic_gbps: Option<f64>,
    /// `--global-batch`: sequences per iteration.
    pub global_batch: Option<u32>,
    /// `--warmup`: iteration lines dropped instead of [`warmup_lines`]'s count.
    pub warmup: Option<usize>,
    /// `--group`: the runs' group instead of `jobs-<stem>`.
    pub group: Option<String>,
}

impl Overrides {
    /// Checks each flag's value, naming the flag, the value and what is allowed.
    pub fn check(&self) -> Result<(), TunerError> {
        if let Some(id) = &self.gpu {
            if crate::catalog::gpu(id).is_err() {
                let ids: Vec<&str> = crate::catalog::GPUS.iter().map(|g| g.id).collect();
                return Err(bad_input(
                    "--gpu",
                    id,
                    &format!("a catalog GPU id: {}", ids.join(", ")),
                ));
            }
        }
        let positive = |flag: &str, v: Option<u32>, most: u32| match v {
            Some(n) if n == 0 || n > most => Err(bad_input(
                flag,
                n,
                &format!("a positive count, at most {most}"),
            )),
            _ => Ok(()),
        };
        positive("--gpus", self.gpus, 1 << 20)?;
        positive("--gpus-per-node", self.gpus_per_node, 1024)?;
        positive("--global-batch", self.global_batch, 1 << 24)?;
        if let Some(n) = self.nics_per_node {
            if n > 1024 {
                return Err(bad_input("--nics-per-node", n, "a count up to 1024"));
            }
        }
        if let Some(g) = self.nic_gbps {
            if !(g.is_finite() && g > 0.0 && g <= 1e5) {
                return Err(bad_input(
                    "--nic-gbps",
                    g,
                    "a positive rate in Gbit/s, at most 100000",
                ));
            }
        }
        if let Some(group) = &self.group {
            if group.trim().is_empty() {
                return Err(bad_input("--group", "''", "a non-empty name"));
            }
        }
        Ok(())
    }
}

/// A run in format 1, as written.
#[derive(Debug, Clone, Serialize)]
pub struct RunOut {
    /// From the file stem.
    pub id: String,
    /// `jobs-<stem>` or `--group`.
    pub group: String,
    /// The file and the family.
    pub source: String,
    /// Model shape.
    pub model: ModelOut,
    /// Cluster.
    pub cluster: ClusterOut,
    /// Layout.
    pub layout: LayoutOut,
    /// What was measured.
    pub observed: ObservedOut,
    /// How each figure was read, what was derived, what stays null.
    pub notes: String,
}

/// Format 1's `model`; `None` is `null`.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ModelOut {
    pub name: Option<String>,
    pub layers: Option<u32>,
    pub hidden: Option<u32>,
    pub heads: Option<u32>,
    pub kv_heads: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    pub ffn_hidden: Option<u32>,
    pub ffn_act: Option<FfnAct>,
    pub vocab: Option<u32>,
    pub seq_len: Option<u32>,
    pub tied_embeddings: Option<bool>,
    pub moe: Option<Moe>,
}

/// Format 1's `cluster`.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ClusterOut {
    pub gpu: Option<String>,
    pub gpus: Option<u32>,
    pub gpus_per_node: Option<u32>,
    pub nics_per_node: Option<u32>,
    pub nic_gbps: Option<f64>,
}

/// Format 1's `layout`.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct LayoutOut {
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub dp: Option<u32>,
    pub ep: Option<u32>,
    pub cp: Option<u32>,
    pub virtual_stages: Option<u32>,
    pub microbatch_size: Option<u32>,
    pub global_batch_size: Option<u32>,
    pub zero_stage: Option<u8>,
    pub recompute: Option<Recompute>,
    pub sequence_parallel: Option<bool>,
    pub schedule: Option<String>,
    pub precision: Option<Precision>,
    pub attention: Option<Attention>,
    pub overlap_grad_reduce: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_compile: Option<bool>,
}

/// Format 1's `observed`.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ObservedOut {
    pub iteration_time_s: Option<f64>,
    pub tokens_per_s: Option<u64>,
    pub tflops_per_gpu: Option<f64>,
    pub tflops_kind: Option<String>,
}

/// A run and what to tell the user about it.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The run.
    pub run: RunOut,
    /// Notes for stderr, one per fact.
    pub notes: Vec<String>,
    /// Fields format 1 needs that are still `null` (`cluster.gpu`, ...).
    pub missing: Vec<&'static str>,
}

/// The value of `field`: the log's, or the flag's where the log is silent; a flag that
/// contradicts the log is refused naming both.
fn pick<T: PartialEq + Display + Clone>(
    file: &str,
    flag: &'static str,
    what: &'static str,
    stated: &Option<Stated<T>>,
    given: Option<T>,
) -> Result<Option<T>, JobError> {
    match (stated, given) {
        (Some(s), Some(g)) if s.value != g => Err(JobError::Contradicts {
            file: file.to_string(),
            flag,
            value: g.to_string(),
            line: s.line,
            stated: s.value.to_string(),
            what,
        }),
        (Some(s), _) => Ok(Some(s.value.clone())),
        (None, g) => Ok(g),
    }
}

fn value<T: Clone>(s: &Option<Stated<T>>) -> Option<T> {
    s.as_ref().map(|s| s.value.clone())
}

/// One line per iteration number: rank 0's where a launcher prefix names ranks, else the
/// first printed. Ranks print the same iteration (torchtitan without `--local-ranks-filter`,
/// every NeMo rank's progress bar); a restarted job prints it again.
fn one_per_iteration(steps: &[Step]) -> (Vec<Step>, usize) {
    let mut by: BTreeMap<u64, Step> = BTreeMap::new();
    let mut duplicates = 0;
    for s in steps {
        match by.get_mut(&s.number) {
            None => {
                by.insert(s.number, s.clone());
            }
            Some(kept) => {
                duplicates += 1;
                if kept.rank != Some(0) && s.rank == Some(0) {
                    *kept = s.clone();
                }
            }
        }
    }
    (by.into_values().collect(), duplicates)
}

fn range(a: u64, b: u64) -> String {
    if a == b {
        format!("iteration {a}")
    } else {
        format!("iterations {a}-{b}")
    }
}

/// Rounds `x` to 6 significant digits, so the file does not print a float's noise.
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}

/// The run for `job`, read from `file` (`stem` names it), with the flags filling what the log
/// lacks.
pub fn to_run(job: &Job, file: &str, stem: &str, o: &Overrides) -> Result<JobRun, JobError> {
    let mut notes: Vec<String> = Vec::new();
    let mut later: Vec<String> = Vec::new();
    let c = &job.cluster;
    let l = &job.layout;
    let m = &job.model;

    let gpu = match (&c.gpu, &o.gpu) {
        // A flag may name a variant of the part the log names (`h100-sxm-96gb-500w` for a log
        // that says H100): the part's first word must agree.
        (Some(s), Some(g)) if s.value.split('-').next() != g.split('-').next() => {
            return Err(JobError::Contradicts {
                file: file.to_string(),
                flag: "--gpu",
                value: g.clone(),
                line: s.line,
                stated: s.value.clone(),
                what: "cluster.gpu",
            })
        }
        (_, Some(g)) => Some(g.clone()),
        (Some(s), None) => Some(s.value.clone()),
        (None, None) => None,
    };
    let mut gpus = pick(file, "--gpus", "cluster.gpus", &c.gpus, o.gpus)?;
    let gpus_per_node = pick(
        file,
        "--gpus-per-node",
        "cluster.gpus_per_node",
        &c.gpus_per_node,
        o.gpus_per_node,
    )?;
    let nics_per_node = pick(
        file,
        "--nics-per-node",
        "cluster.nics_per_node",
        &c.nics_per_node,
        o.nics_per_node,
    )?;
    let nic_gbps = pick(
        file,
        "--nic-gbps",
        "cluster.nic_gbps",
        &c.nic_gbps,
        o.nic_gbps,
    )?;
    let global_batch = pick(
        file,
        "--global-batch",
        "layout.global_batch_size",
        &l.global_batch_size,
        o.global_batch,
    )?;

    let (tp, pp, cp) = (value(&l.tp), value(&l.pp), value(&l.cp));
    let mut dp = value(&l.dp);
    // tp x pp x dp x cp = GPUs, the identity format 1 holds every run to: either side from
    // the other where the log states one.
    let model_parallel = match (tp, pp) {
        (Some(t), Some(p)) => u64::from(t)
            .checked_mul(u64::from(p))
            .and_then(|x| x.checked_mul(u64::from(cp.unwrap_or(1)))),
        _ => None,
    };
    match (gpus, dp, model_parallel) {
        (Some(g), None, Some(mp)) if mp > 0 && u64::from(g) % mp == 0 => {
            dp = u32::try_from(u64::from(g) / mp).ok();
            notes.push(format!(
                "dp = {} derived: GPUs / (tp x pp x cp)",
                dp.unwrap_or(0)
            ));
        }
        (None, Some(d), Some(mp)) => {
            gpus = mp
                .checked_mul(u64::from(d))
                .and_then(|g| u32::try_from(g).ok());
            if let Some(g) = gpus {
                notes.push(format!("cluster.gpus = {g} derived: tp x pp x dp x cp"));
            }
        }
        _ => {}
    }

    // Steady state.
    let (mut steps, duplicates) = one_per_iteration(&job.steps);
    if let Some(last) = steps.last().and_then(|s| s.batch) {
        let before = steps.len();
        steps.retain(|s| s.batch.is_none_or(|b| b == last));
        if steps.len() < before {
            notes.push(format!(
                "the global batch ramps up: only the {} lines at the final {last} sequences are used, {} earlier ones dropped",
                steps.len(),
                before - steps.len()
            ));
        }
    }
    let seq_len = value(&m.seq_len);
    let to_seconds = |v: f64| -> Option<f64> {
        let t = match job.measure {
            Measure::Seconds => v,
            Measure::TokensPerGpuPerSecond => {
                f64::from(global_batch?) * f64::from(seq_len?) / (v * f64::from(gpus?))
            }
            Measure::SamplesPerSecond => f64::from(global_batch?) / v,
        };
        (t.is_finite() && t > 0.0).then_some(t)
    };
    let times: Vec<(u64, f64)> = steps
        .iter()
        .filter_map(|s| to_seconds(s.value).map(|t| (s.number, t)))
        .collect();
    if let Some(w) = o.warmup {
        if w >= steps.len() {
            return Err(JobError::Warmup {
                file: file.to_string(),
                warmup: w,
                lines: steps.len(),
            });
        }
    }
    let steady = steady_state(&times, o.warmup);
    let dedup = if duplicates > 0 {
        format!(
            "; {duplicates} repeated lines for an iteration already seen dropped (rank 0's kept where a launcher prefix names ranks, else the first printed)"
        )
    } else {
        String::new()
    };
    let interval = if job.averaged {
        "; each line averages the iterations since the line before"
    } else {
        ""
    };
    match &steady {
        Some(s) => {
            let warm = match (s.dropped, s.dropped_range) {
                (0, _) | (_, None) => "none dropped as warm-up (too few lines)".to_string(),
                (d, Some((a, b))) => format!(
                    "the first {d} line{} ({}) dropped as warm-up{}",
                    if d == 1 { "" } else { "s" },
                    range(a, b),
                    if o.warmup.is_some() {
                        ", as --warmup says"
                    } else {
                        ""
                    }
                ),
            };
            let how = match job.measure {
                Measure::Seconds => format!("{} as the log prints it", job.figure),
                Measure::TokensPerGpuPerSecond => format!(
                    "derived from {}: global batch {} x {} tokens / (tps x {} GPUs)",
                    job.figure,
                    global_batch.unwrap_or(0),
                    seq_len.unwrap_or(0),
                    gpus.unwrap_or(0)
                ),
                Measure::SamplesPerSecond => format!(
                    "derived from {}: train_batch_size {} / samples per second",
                    job.figure,
                    global_batch.unwrap_or(0)
                ),
            };
            notes.insert(
                0,
                format!(
                    "iteration_time_s: median of {} logged iteration{} ({}; {warm}){interval}; {how}{dedup}",
                    s.kept,
                    if s.kept == 1 { "" } else { "s" },
                    range(s.kept_range.0, s.kept_range.1),
                ),
            );
        }
        None => {
            let lacks: Vec<&str> = [
                (
                    global_batch.is_none(),
                    "the global batch (pass --global-batch)",
                ),
                (
                    seq_len.is_none() && job.measure == Measure::TokensPerGpuPerSecond,
                    "the sequence length",
                ),
                (
                    gpus.is_none() && job.measure == Measure::TokensPerGpuPerSecond,
                    "the GPU count (pass --gpus)",
                ),
            ]
            .into_iter()
            .filter(|(lack, _)| *lack)
            .map(|(_, what)| what)
            .collect();
            notes.insert(
                0,
                format!(
                    "iteration_time_s: null: {} is a rate, not a step time, and the log does not state {}{dedup}",
                    job.figure,
                    lacks.join(" or ")
                ),
            );
        }
    }
    let iteration_time_s = steady.as_ref().map(|s| sig6(s.median_s));
    let tokens_per_s = match (iteration_time_s, global_batch, seq_len) {
        (Some(t), Some(b), Some(s)) => Some((f64::from(b) * f64::from(s) / t).round() as u64),
        _ => None,
    };
    let kept_tflops: Vec<f64> = match &steady {
        Some(s) => steps
            .iter()
            .filter(|st| st.number >= s.kept_range.0)
            .filter_map(|st| st.tflops)
            .collect(),
        None => Vec::new(),
    };
    let tflops_per_gpu = (!kept_tflops.is_empty()).then(|| sig6(median(kept_tflops)));

    notes.extend(job.notes.iter().cloned());
    for s in &job.skipped {
        later.push(format!("skipped {s}"));
    }

    // The schedule format 1 names: interleaved with virtual stages, plain 1F1B with a pipeline.
    let v = value(&l.virtual_stages);
    let schedule = match (pp, v) {
        (Some(p), Some(v)) if p > 1 && v > 1 => Some("interleaved".to_string()),
        (Some(p), _) if p > 1 => Some("1f1b".to_string()),
        _ => None,
    };

    let run = RunOut {
        id: stem.to_string(),
        group: o.group.clone().unwrap_or_else(|| format!("jobs-{stem}")),
        source: format!(
            "{} log {file}{}, read by tuner jobs-from-logs",
            job.family.name(),
            job.date
                .as_deref()
                .map(|d| format!(" (dated {d})"))
                .unwrap_or_default()
        ),
        model: ModelOut {
            name: Some(value(&m.name).unwrap_or_else(|| {
                notes.push("model.name is the file stem: the log names no model".into());
                stem.to_string()
            })),
            layers: value(&m.layers),
            hidden: value(&m.hidden),
            heads: value(&m.heads),
            kv_heads: value(&m.kv_heads),
            head_dim: value(&m.head_dim),
            ffn_hidden: value(&m.ffn_hidden),
            ffn_act: value(&m.ffn_act),
            vocab: value(&m.vocab),
            seq_len,
            tied_embeddings: value(&m.tied_embeddings),
            moe: value(&m.moe).flatten(),
        },
        cluster: ClusterOut {
            gpu,
            gpus,
            gpus_per_node,
            nics_per_node,
            nic_gbps,
        },
        layout: LayoutOut {
            tp,
            pp,
            dp,
            ep: value(&l.ep),
            cp,
            virtual_stages: v,
            microbatch_size: value(&l.microbatch_size),
            global_batch_size: global_batch,
            zero_stage: value(&l.zero_stage),
            recompute: value(&l.recompute),
            sequence_parallel: value(&l.sequence_parallel),
            schedule,
            precision: value(&l.precision),
            attention: value(&l.attention),
            overlap_grad_reduce: value(&l.overlap_grad_reduce),
            torch_compile: value(&l.torch_compile),
        },
        observed: ObservedOut {
            iteration_time_s,
            tokens_per_s,
            tflops_per_gpu,
            tflops_kind: tflops_per_gpu.and(job.tflops_kind).map(str::to_string),
        },
        notes: String::new(),
    };
    let missing = missing_fields(&run);
    let unstated = unstated(&run, job);
    if !unstated.is_empty() {
        notes.push(format!("not stated in the log: {}", unstated.join(", ")));
    }
    let mut run = run;
    run.notes = notes.join(". ") + ".";
    notes.extend(later);
    if !missing.is_empty() {
        notes.push(format!(
            "{stem}: null where format 1 needs a value ({}): fill them in before `tuner validate --runs` reads it",
            missing.join(", ")
        ));
    }
    Ok(JobRun {
        run,
        notes,
        missing,
    })
}

/// The fields format 1 requires that `run` leaves null.
fn missing_fields(run: &RunOut) -> Vec<&'static str> {
    let m = &run.model;
    let c = &run.cluster;
    let l = &run.layout;
    [
        (m.name.is_none(), "model.name"),
        (m.layers.is_none(), "model.layers"),
        (m.hidden.is_none(), "model.hidden"),
        (m.heads.is_none(), "model.heads"),
        (m.ffn_act.is_none(), "model.ffn_act"),
        (m.vocab.is_none(), "model.vocab"),
        (m.seq_len.is_none(), "model.seq_len"),
        (m.tied_embeddings.is_none(), "model.tied_embeddings"),
        (c.gpu.is_none(), "cluster.gpu"),
        (c.gpus.is_none(), "cluster.gpus"),
        (c.gpus_per_node.is_none(), "cluster.gpus_per_node"),
        (c.nics_per_node.is_none(), "cluster.nics_per_node"),
        (c.nic_gbps.is_none(), "cluster.nic_gbps"),
        (l.tp.is_none(), "layout.tp"),
        (l.pp.is_none(), "layout.pp"),
        (l.dp.is_none(), "layout.dp"),
        (l.global_batch_size.is_none(), "layout.global_batch_size"),
        (
            run.observed.iteration_time_s.is_none(),
            "observed.iteration_time_s",
        ),
    ]
    .into_iter()
    .filter(|(null, _)| *null)
    .map(|(_, name)| name)
    .collect()
}

/// What the log did not state, with the flag that fills it where there is one; fields a flag
/// filled are not listed.
fn unstated(run: &RunOut, job: &Job) -> Vec<String> {
    let m = &run.model;
    let c = &run.cluster;
    let l = &run.layout;
    let mut out = Vec::new();
    let shape: Vec<&str> = [
        (m.layers.is_none(), "layers"),
        (m.hidden.is_none(), "hidden"),
        (m.heads.is_none(), "heads"),
        (m.kv_heads.is_none(), "kv_heads (null reads as heads)"),
        (
            m.ffn_hidden.is_none(),
            "ffn_hidden (null reads as 4 x hidden)",
        ),
        (m.ffn_act.is_none(), "ffn_act"),
        (m.vocab.is_none(), "vocab"),
        (m.seq_len.is_none(), "seq_len"),
        (m.tied_embeddings.is_none(), "tied_embeddings"),
        (job.model.moe.is_none(), "moe (null reads as dense)"),
    ]
    .into_iter()
    .filter(|(n, _)| *n)
    .map(|(_, s)| s)
    .collect();
    if !shape.is_empty() {
        out.push(format!("model {}", shape.join(", ")));
    }
    for (null, text) in [
        (c.gpu.is_none(), "gpu (pass --gpu)"),
        (c.gpus.is_none(), "GPU count (pass --gpus)"),
        (
            c.gpus_per_node.is_none(),
            "gpus_per_node (pass --gpus-per-node)",
        ),
        (
            c.nics_per_node.is_none(),
            "nics_per_node (pass --nics-per-node)",
        ),
        (c.nic_gbps.is_none(), "nic_gbps (pass --nic-gbps)"),
        (
            l.global_batch_size.is_none(),
            "global batch (pass --global-batch)",
        ),
    ] {
        if null {
            out.push(text.to_string());
        }
    }
    let knobs: Vec<&str> = [
        (l.tp.is_none(), "tp"),
        (l.pp.is_none(), "pp"),
        (l.dp.is_none(), "dp"),
        (l.ep.is_none(), "ep"),
        (l.cp.is_none(), "cp"),
        (l.microbatch_size.is_none(), "microbatch_size"),
        (l.zero_stage.is_none(), "zero_stage"),
        (l.recompute.is_none(), "recompute"),
        (l.sequence_parallel.is_none(), "sequence_parallel"),
        (l.precision.is_none(), "precision"),
        (l.attention.is_none(), "attention"),
        (l.overlap_grad_reduce.is_none(), "overlap_grad_reduce"),
    ]
    .into_iter()
    .filter(|(n, _)| *n)
    .map(|(_, s)| s)
    .collect();
    if !knobs.is_empty() {
        out.push(format!(
            "layout {} (validate chooses these as a careful user would)",
            knobs.join(", ")
        ));
    }
    out
}

/// The runs file for `runs`: `format: 1` under a header like the data files'.
pub fn render(runs: &[RunOut]) -> Result<String, TunerError> {
    #[derive(Serialize)]
    struct Doc<'a> {
        format: u32,
        runs: &'a [RunOut],
    }
    let yaml = serde_saphyr::to_string(&Doc { format: 1, runs }).map_err(|e| TunerError::Yaml {
        origin: "jobs-from-logs output".into(),
        message: e.to_string(),
    })?;
    Ok(format!(
        "# meshfit runs, format 1. Units: seconds, tokens/s (whole job), TFLOP/s per GPU. null = not stated in the\n\
         # log: fill it in, or `tuner validate` chooses it where the format allows. global_batch_size counts sequences.\n\
         # Written by `tuner jobs-from-logs` from the training logs each run's `source` names; `notes` say how each\n\
         # figure was read and what the log did not state.\n{yaml}"
    ))
}

/// Every log in `paths` as a run, in order, and the notes for stderr: the library half of
/// `tuner jobs-from-logs`. The first log that cannot become a run stops it, named.
pub fn jobs_from_logs(paths: &[&Path], o: &Overrides) -> Result<(String, Vec<String>), JobError> {
    o.check()?;
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        let file = path.display().to_string();
        let (text, lossy) = read_log_file(path)?;
        if let Some(n) = lossy {
            notes.push(format!("{file}: {n}"));
        }
        let job = read_log(&text, &file)?;
        let base = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "job".into());
        // Two logs with one stem (run1/train.log, run2/train.log) get -2, -3: ids are unique.
        let mut stem = base.clone();
        let mut k = 1;
        while ids.contains_key(&stem) {
            k += 1;
            stem = format!("{base}-{k}");
        }
        ids.insert(stem.clone(), file.clone());
        let r = to_run(&job, &file, &stem, o)?;
        notes.push(format!(
            "{file}: {} log, {} iteration lines",
            job.family.name(),
            job.steps.len()
        ));
        notes.extend(r.notes.iter().map(|n| {
            if n.starts_with(&stem) {
                n.clone()
            } else {
                format!("{file}: {n}")
            }
        }));
        runs.push(r.run);
    }
    Ok((render(&runs)?, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_drops_a_tenth_and_at_least_two_but_never_all() {
        let got: Vec<usize> = [0, 1, 2, 3, 10, 20, 21, 40, 100]
            .iter()
            .map(|&n| warmup_lines(n))
            .collect();
        assert_eq!(got, [0, 0, 1, 2, 2, 2, 3, 4, 10]);
    }

    #[test]
    fn steady_state_is_the_median_after_the_warmup() {
        // Iteration 1 compiles (9 s), iteration 7 saves a checkpoint (30 s).
        let t: Vec<(u64, f64)> = [9.0, 2.5, 1.0, 1.2, 1.1, 1.3, 30.0, 1.0]
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as u64 + 1, s))
            .collect();
        let s = steady_state(&t, None).unwrap();
        assert_eq!((s.kept, s.dropped), (6, 2));
        assert_eq!(s.kept_range, (3, 8));
        assert_eq!(s.dropped_range, Some((1, 2)));
        assert!((s.median_s - 1.15).abs() < 1e-12, "{}", s.median_s);
        assert!(steady_state(&t, Some(8)).is_none());
        assert_eq!(steady_state(&t, Some(0)).unwrap().kept, 8);
        assert!(steady_state(&[], None).is_none());
    }

    #[test]
    fn repeated_iterations_keep_rank_zero() {
        let step = |number, value, rank| Step {
            number,
            value,
            line: 1,
            rank,
            tflops: None,
            batch: None,
        };
        let (kept, dups) = one_per_iteration(&[
            step(2, 5.0, Some(3)),
            step(1, 1.0, None),
            step(2, 2.0, Some(0)),
            step(2, 7.0, Some(1)),
        ]);
        assert_eq!(dups, 2);
        assert_eq!(kept.iter().map(|s| s.value).collect::<Vec<_>>(), [1.0, 2.0]);
    }

    #[test]
    fn flags_are_checked_by_name() {
        let bad = Overrides {
            gpu: Some("h100".into()),
            ..Overrides::default()
        };
        let e = bad.check().unwrap_err().to_string();
        assert!(
            e.starts_with("--gpu = h100: expected a catalog GPU id: "),
            "{e}"
        );
        assert!(e.contains("h100-sxm"), "{e}");
        let zero = Overrides {
            gpus_per_node: Some(0),
            ..Overrides::default()
        };
        assert!(zero
            .check()
            .unwrap_err()
            .to_string()
            .starts_with("--gpus-per-node = 0"));
        let nan = Overrides {
            nic_gbps: Some(f64::NAN),
            ..Overrides::default()
        };
        assert!(nan.check().is_err());
    }

    #[test]
    fn sizes_at_the_edge_of_u32_do_not_overflow() {
        let big = u32::MAX;
        let megatron = format!(
            "------------------------ arguments ------------------------\n  num_layers ... {big}\n  hidden_size ... {big}\n  num_attention_heads ... 1\n  kv_channels ... 7\n  tensor_model_parallel_size ... {big}\n  pipeline_model_parallel_size ... {big}\n  context_parallel_size ... {big}\n  data_parallel_size ... {big}\n  num_layers_per_virtual_pipeline_stage ... {big}\n  num_experts ... {big}\n  moe_ffn_hidden_size ... 1\n  moe_shared_expert_intermediate_size ... {big}\n  global_batch_size ... {big}\n-------------------- end of arguments ---------------------\n iteration 1/ 2 | elapsed time per iteration (ms): 1e308 |\n iteration 2/ 2 | elapsed time per iteration (ms): 1e-308 |\n"
        );
        let titan = format!(
            "Building 3-D device mesh with ['dp', 'dp_shard', 'tp'], [{big}, {big}, {big}]\nBuilding llama3 8B with ModelArgs(dim={big}, multiple_of={big}, ffn_dim_multiplier=1e300)\nglobal batch size {big}, sequence length {big}\nstep: 1 tps: 1e-300\nstep: 2 tps: 1e300\n"
        );
        for (text, name) in [(megatron, "m.log"), (titan, "t.log")] {
            let job = read_log(&text, name).unwrap();
            let o = Overrides {
                gpus: Some(1 << 20),
                warmup: Some(0),
                ..Overrides::default()
            };
            let r = to_run(&job, name, "x", &o).unwrap();
            assert!(r.run.observed.iteration_time_s.is_none_or(f64::is_finite));
            render(&[r.run]).unwrap();
        }
    }

    #[test]
    fn an_unknown_file_is_refused_by_name() {
        let e = read_log("hello\nworld\n", "notes.txt")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "notes.txt: no iteration lines (expected Megatron-LM 'elapsed time per iteration (ms)', \
             NeMo 'train_step_timing', torchtitan 'tps', DeepSpeed 'samples/sec')"
        );
    }
}
