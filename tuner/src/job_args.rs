//! The job a command prices, as its flags say: model, scale, cluster, training inputs and
//! pinned knobs, resolved into a scenario with a note on every default.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, ValueEnum};

use tuner::catalog::{self, Cluster, NOMINAL};
use tuner::cost::Scenario;
use tuner::mesh::{ExpertGemms, Framework, MoeDispatch, Precision, ReduceDtype, Training};

use crate::exit::{bad_flag, from_flags};
use crate::render::Format;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Emit {
    /// Megatron-LM core_v0.19 pretrain_gpt.py arguments.
    Megatron,
    /// A DeepSpeed 0.19 JSON config.
    Deepspeed,
    /// torchtitan 0.3's command-line arguments.
    Torchtitan,
    /// torchtitan v0.2's TOML job config.
    #[value(name = "torchtitan-0.2")]
    TorchtitanV02,
}

impl Emit {
    /// The flag value, as clap spells it.
    pub(crate) fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// The framework whose launch config this is, and so whose runtime is priced.
    pub(crate) fn framework(self) -> Framework {
        match self {
            Emit::Megatron => Framework::Megatron,
            Emit::Deepspeed => Framework::Deepspeed,
            Emit::Torchtitan | Emit::TorchtitanV02 => Framework::Fsdp,
        }
    }
}

/// What the job is: model, scale, cluster, training inputs.
#[derive(Debug, Args)]
pub(crate) struct JobArgs {
    /// Catalog model, alias (`70b`) or YAML file.
    #[arg(long)]
    pub(crate) model: String,
    /// GPUs for the job.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) gpus: i64,
    /// Cluster preset (see `tuner clusters`).
    #[arg(long, default_value = "dgx-h100")]
    pub(crate) cluster: String,
    /// Override the preset's GPUs per node.
    #[arg(long)]
    pub(crate) gpus_per_node: Option<u32>,
    /// Override the GPUs sharing one NVLink fabric (72 for a GB200 NVL72 rack; default: the
    /// preset's, or the node under --gpus-per-node).
    #[arg(long)]
    pub(crate) nvlink_domain: Option<u32>,
    /// Override the preset's NICs per node.
    #[arg(long)]
    pub(crate) nics_per_node: Option<u32>,
    /// Override the preset's NIC line rate, Gbit/s.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) nic_gbps: Option<f64>,
    /// Sequence length (default: the model's).
    #[arg(long)]
    pub(crate) seq_len: Option<u32>,
    /// Global batch in tokens: 4194304, 4M (10^6) or 4Mi (2^20); default 4Mi.
    #[arg(long, conflicts_with = "global_batch")]
    pub(crate) global_batch_tokens: Option<String>,
    /// Global batch in sequences.
    #[arg(long)]
    pub(crate) global_batch: Option<u32>,
    /// GEMM precision.
    #[arg(long, value_enum, default_value_t = Precision::Bf16)]
    pub(crate) precision: Precision,
    /// Price unfused attention that stores the s x s scores.
    #[arg(long)]
    pub(crate) no_flash_attention: bool,
    /// Price gradient reduction that waits for backward to finish.
    #[arg(long)]
    pub(crate) no_overlap_grad_reduce: bool,
    /// Price tensor-parallel collectives that wait for their GEMMs (Megatron without
    /// `--tp-comm-overlap`); by default Megatron overlaps them on Hopper and newer, over NVLink.
    #[arg(long)]
    pub(crate) no_tp_comm_overlap: bool,
    /// Framework whose gradient bucketing, kernels and recomputation are priced (default: the
    /// one `--emit` writes a config for, else megatron).
    #[arg(long, value_enum)]
    pub(crate) framework: Option<Framework>,
    /// Gradient reduction type (default: fp32, what Megatron-LM and torchtitan do under bf16;
    /// bf16 for DeepSpeed, which reduces in the training type).
    #[arg(long, value_enum)]
    pub(crate) grad_reduce: Option<ReduceDtype>,
    /// How MoE tokens reach their experts: NCCL all-to-all, or each token once per node and
    /// over NVLink from there (DeepEP, Megatron's flex dispatcher).
    #[arg(long, value_enum, default_value_t = MoeDispatch::AllToAll)]
    pub(crate) moe_dispatch: MoeDispatch,
    /// How the MoE layer launches its local experts' GEMMs (default: the framework's: one
    /// per expert under Megatron, whose Transformer Engine loops over them; one grouped
    /// launch under torchtitan; one after another under DeepSpeed). `grouped` prices
    /// Megatron-Core's `moe_use_grouped_tensor` or, in bf16 on Hopper,
    /// `NVTE_USE_CUTLASS_GROUPED_GEMM=1`.
    #[arg(long, value_enum)]
    pub(crate) expert_gemms: Option<ExpertGemms>,
    /// A calibration profile (`tuner calibrate -o`): its knobs in place of the catalog's.
    #[arg(long)]
    pub(crate) profile: Option<PathBuf>,
    /// Output format; JSON and YAML documents start with `schema_version` (now 1).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
}

pub(crate) const DEFAULT_BATCH_TOKENS: u64 = 4 << 20;

/// Largest job priced: 2^20 GPUs, past the largest clusters built.
pub(crate) const MAX_GPUS: u32 = 1 << 20;

/// Largest global batch priced: 2^24 sequences or 2^40 tokens, a thousand times what any
/// published run used.
pub(crate) const MAX_GLOBAL_BATCH: u32 = 1 << 24;
pub(crate) const MAX_BATCH_TOKENS: f64 = (1u64 << 40) as f64;

/// Parses 4194304, 4M, 4.5M, 16Mi, 512K: K, M, G, T are powers of 1000, Ki, Mi, Gi, Ti of
/// 1024 (parse-size's decimal system).
pub(crate) fn parse_tokens(s: &str) -> anyhow::Result<u64> {
    match parse_size::parse_size(s.trim()) {
        Ok(n) if n > 0 && n as f64 <= MAX_BATCH_TOKENS => Ok(n),
        _ => Err(bad_flag(
            "--global-batch-tokens",
            s,
            "a positive token count up to 1Ti (2^40; suffixes K, M, G, T, Ki, Mi, Gi, Ti), such \
             as 4194304, 4M or 4Mi",
        )
        .into()),
    }
}

impl JobArgs {
    /// The framework priced: `--framework`, else the one `emit` writes for, else Megatron. A
    /// config for one framework priced as another would launch a job nobody priced.
    pub(crate) fn framework(&self, emit: Option<Emit>) -> anyhow::Result<Framework> {
        match (self.framework, emit) {
            (Some(f), Some(e)) if f != e.framework() => Err(bad_flag(
                "--framework",
                f,
                &format!(
                    "{}, the framework `--emit {}` writes for (or leave --framework out)",
                    e.framework(),
                    e.name()
                ),
            )
            .into()),
            (Some(f), _) => Ok(f),
            (None, e) => Ok(e.map_or(Framework::Megatron, Emit::framework)),
        }
    }

    /// The cluster preset, with the node's GPUs, NICs and NIC speed where the flags change
    /// them, checked for `gpus`.
    fn cluster(&self, gpus: u32) -> anyhow::Result<Cluster> {
        let mut cluster: Cluster = catalog::cluster(&self.cluster).map_err(from_flags)?;
        if let Some(n) = self.gpus_per_node {
            cluster.gpus_per_node = n;
            cluster.nvlink_domain =
                cluster
                    .nvlink_domain
                    .min(n)
                    .max(if cluster.gpu.nvlink_bytes_per_s > 0.0 {
                        n
                    } else {
                        1
                    });
        }
        if let Some(n) = self.nvlink_domain {
            cluster.nvlink_domain = n;
        }
        if let Some(n) = self.nics_per_node {
            cluster.nics_per_node = n;
        }
        if let Some(g) = self.nic_gbps {
            cluster.nic_bits_per_s = g * 1e9;
        }
        cluster
            .check(gpus, |field| format!("--{}", field.replace('_', "-")))
            .map_err(from_flags)?;
        Ok(cluster)
    }

    /// Sequences per step: `--global-batch`, else `--global-batch-tokens` (4Mi by default)
    /// in whole sequences of `seq_len`, with a note where it rounds or defaults.
    fn global_batch(&self, seq_len: u32, notes: &mut Vec<String>) -> anyhow::Result<u32> {
        Ok(match (self.global_batch, &self.global_batch_tokens) {
            (Some(0), _) => bail!(bad_flag(
                "--global-batch",
                0,
                "a positive number of sequences"
            )),
            (Some(b), _) if b > MAX_GLOBAL_BATCH => {
                bail!(bad_flag("--global-batch", b, "at most 16777216 sequences"))
            }
            (Some(b), _) => b,
            (None, tokens) => {
                let (tokens, default) = match tokens {
                    Some(t) => (parse_tokens(t)?, false),
                    None => (DEFAULT_BATCH_TOKENS, true),
                };
                let seqs = ((tokens as f64 / f64::from(seq_len)).round() as u32).max(1);
                if default {
                    notes.push(format!("global batch {seqs} sequences = {:.2}M tokens (default 4Mi tokens; set --global-batch-tokens)", f64::from(seqs) * f64::from(seq_len) / 1e6));
                } else if u64::from(seqs) * u64::from(seq_len) != tokens {
                    notes.push(format!(
                        "global batch rounded to {seqs} whole sequences of {seq_len} tokens"
                    ));
                }
                seqs
            }
        })
    }

    /// Resolves the job into a scenario, with notes on every default and alias used.
    pub(crate) fn scenario(&self, emit: Option<Emit>) -> anyhow::Result<(Scenario, Vec<String>)> {
        let mut notes = Vec::new();
        if self.gpus <= 0 {
            bail!(bad_flag("--gpus", self.gpus, "a positive GPU count"));
        }
        let framework = self.framework(emit)?;
        if let (None, Some(e)) = (self.framework, emit) {
            notes.push(format!(
                "framework: {framework}, whose runtime the --emit {} config launches",
                e.name()
            ));
        }
        if self.gpus > i64::from(MAX_GPUS) {
            bail!(bad_flag(
                "--gpus",
                self.gpus,
                "at most 1048576: no cluster holds more"
            ));
        }
        let gpus = self.gpus as u32;
        let resolved = catalog::model(&self.model).map_err(from_flags)?;
        notes.extend(resolved.note);
        let model = resolved.shape;
        let cluster = self.cluster(gpus)?;
        let seq_len = match self.seq_len {
            Some(0) => bail!(bad_flag("--seq-len", 0, "a positive length")),
            Some(s) => s,
            None => {
                notes.push(format!(
                    "seq_len {} from {} (set --seq-len to change)",
                    model.seq_len, model.name
                ));
                model.seq_len
            }
        };
        let global_batch = self.global_batch(seq_len, &mut notes)?;
        if self.precision.is_fp8() && cluster.gpu.fp8_flops.is_none() {
            notes.push(format!(
                "{} has no fp8 tensor cores: priced at its bf16 peak",
                cluster.gpu.id
            ));
        }
        notes.push("optimizer: mixed-precision Adam, 16 bytes of model state per parameter".into());

        // The framework's defaults, changed where the flags say otherwise.
        let defaults = Training::for_framework(framework, cluster.gpu.arch, seq_len, global_batch);
        let training = Training {
            precision: self.precision,
            flash_attention: !self.no_flash_attention,
            overlap_grad_reduce: !self.no_overlap_grad_reduce,
            tp_comm_overlap: defaults.tp_comm_overlap && !self.no_tp_comm_overlap,
            grad_reduce: self.grad_reduce.unwrap_or(defaults.grad_reduce),
            moe_dispatch: self.moe_dispatch,
            expert_gemms: self.expert_gemms.unwrap_or(defaults.expert_gemms),
            step_graphs: emit == Some(Emit::Torchtitan),
            ..defaults
        };
        if training.step_graphs {
            notes.push(
                "launch: torchtitan 0.3 captures each step in CUDA graphs where the layout \
                 allows (no pipeline, no expert-parallel all-to-all): those layouts pay no host \
                 launch time"
                    .into(),
            );
        }
        let (efficiency, profiled) = efficiency(self.profile.as_deref())?;
        notes.extend(profiled);
        Ok((
            Scenario::nominal(model, training, cluster, gpus, efficiency),
            notes,
        ))
    }
}

/// The catalog's efficiencies, with a profile's calibrated knobs where one is given, and the
/// note that says so.
pub(crate) fn efficiency(
    profile: Option<&std::path::Path>,
) -> anyhow::Result<(catalog::Efficiency, Option<String>)> {
    match profile {
        Some(path) => {
            let p = tuner::calibrate::profile::load(path)?;
            Ok((p.apply(&NOMINAL), Some(p.note(&path.display().to_string()))))
        }
        None => Ok((NOMINAL, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts() {
        assert_eq!(parse_tokens("4194304").unwrap(), 4194304);
        assert_eq!(parse_tokens("4M").unwrap(), 4_000_000);
        assert_eq!(parse_tokens("4.5M").unwrap(), 4_500_000);
        assert_eq!(parse_tokens("512K").unwrap(), 512_000);
        assert_eq!(parse_tokens("16Mi").unwrap(), 16 << 20);
        assert_eq!(parse_tokens(" 2Gi ").unwrap(), 2 << 30);
        for bad in ["-3M", "0", "", "4Q", "M"] {
            assert!(parse_tokens(bad).is_err(), "{bad}");
        }
        assert!(parse_tokens("lots")
            .unwrap_err()
            .to_string()
            .contains("--global-batch-tokens"));
    }

    /// Issue 31: `1Ti` was refused by a message that said "up to 1Ti"; it states the bound in
    /// a form the parser reads.
    #[test]
    fn r31_the_token_bound_is_stated_as_the_parser_reads_it() {
        assert_eq!(parse_tokens("1024Gi").unwrap(), 1 << 40);
        assert_eq!(parse_tokens("1Ti").unwrap(), 1 << 40);
        let err = parse_tokens("1025Gi").unwrap_err().to_string();
        assert!(
            err.contains("--global-batch-tokens = 1025Gi") && err.contains("up to 1Ti (2^40;"),
            "{err}"
        );
    }
}
