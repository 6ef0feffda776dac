//! Format 1 as written: the runs file's types, whose `None` prints `null` for the user to fill
//! in, and the file itself.

use serde::Serialize;

use crate::error::TunerError;
use crate::mesh::{Precision, Recompute};
use crate::model::{FfnAct, Moe};
use crate::validate::Attention;

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
    /// Written where the log states the norms; format 1 reads its absence as none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
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
