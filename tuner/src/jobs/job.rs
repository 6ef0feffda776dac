//! The job a reader fills: each fact with the line that states it, and the iteration lines.
//! The readers share this shape so that one [`super::to_run`] turns any family's log into a run.

use crate::mesh::{Precision, Recompute};
use crate::model::{FfnAct, Moe};
use crate::validate::Attention;

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
    /// Per-head query and key norms (Megatron's `qk_layernorm`).
    pub qk_norm: Option<Stated<bool>>,
    /// `Some(None)`: stated dense.
    pub moe: Option<Stated<Option<Moe>>>,
}

impl ModelFacts {
    /// Keeps `kv_channels` from `line` as the head size only where it is not hidden / heads:
    /// format 1 reads a null head_dim as that quotient, and Megatron's arguments print the
    /// quotient itself where no head size was given.
    pub(crate) fn state_head_dim(&mut self, kv_channels: u32, line: usize) {
        let (Some(h), Some(hidden)) = (value(&self.heads), value(&self.hidden)) else {
            return;
        };
        if h > 0 && kv_channels != hidden / h {
            state(&mut self.head_dim, kv_channels, line);
        }
    }
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
        add("model.qk_norm", s(&m.qk_norm));
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

/// Whether iteration numbers (in the order a reader takes them) skip any: a log that prints
/// every n-th iteration prints on each line the average of the n since the line before.
pub(crate) fn skips(numbers: &[u64]) -> bool {
    numbers.windows(2).any(|w| w[1] > w[0] + 1)
}

/// The value of a statement, without its line: what a run is built from.
pub(crate) fn value<T: Clone>(s: &Option<Stated<T>>) -> Option<T> {
    s.as_ref().map(|s| s.value.clone())
}
