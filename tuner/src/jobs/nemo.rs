//! NeMo's log, and Megatron-Bridge's configuration summary.
//!
//! Step times: NeMo's `train_step_timing` (the `TimingCallback` and exp_manager's step timer),
//! as NeMo 1.x's Lightning progress bar prints it (`Epoch 0: : 47%|████▋ | 7/15 [06:19<07:13,
//! reduced_train_loss=11.50, global_step=5.000, consumed_samples=12288.0, train_step_timing in
//! s=49.50]`, redrawn with carriage returns) and NeMo 2.x's `MegatronProgressBar` prints it
//! (`Training epoch 0, iteration 120/149 | ... | global_step: 120 | ... | train_step_timing in
//! s: 0.03146`). Megatron-Bridge has no `train_step_timing`: it prints Megatron-LM's iteration
//! line, which [`super::megatron`] reads.
//!
//! Configuration: NeMo 1.x's Hydra/OmegaConf dump after `Experiment configuration` (YAML:
//! `trainer.devices`, `trainer.num_nodes`, `model.tensor_model_parallel_size`, ...), NeMo 2.x's
//! `Resolved Arguments` table (`key=value` inside a rich table), Lightning's `Initializing
//! distributed: GLOBAL_RANK: 0, MEMBER: 1/8`, NeMo's `Padded vocab_size: 50304`, and
//! Megatron-Bridge's `Configuration Summary (Non-Default Values vs Megatron Core)`.
//!
//! Cannot read: what a NeMo 2.x recipe's config class sets without printing it (the table
//! lists the arguments given, not `Llama3Config8B`'s own kv heads or vocabulary), values the
//! rich table cuts with `…`, the GPU and the network. The progress bar rounds
//! `train_step_timing` to four significant digits.

use super::lines::{count, count_after, keep_first, leading_number, lines, number_after, Settings};
use super::{state, Family, Job, Measure, Step};
use crate::mesh::{Precision, Recompute};
use crate::model::{FfnAct, Moe};

/// The step-time figure.
pub const MARK: &str = "train_step_timing in s";

/// Configuration values by name.
type Config = Settings;

/// Reads a NeMo log; `None` when no line prints [`MARK`].
pub fn read(text: &str) -> Option<Job> {
    if !text.contains(MARK) {
        return None;
    }
    let mut job = Job::new(Family::Nemo, Measure::Seconds, MARK);
    for line in lines(text) {
        let t: &str = &line.text;
        if t.contains(MARK) {
            step(t, line.number, line.rank, &mut job);
        } else if let Some(at) = t.find("MEMBER: ") {
            // Lightning: `Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8`.
            if let Some((_, world)) = t[at + "MEMBER: ".len()..].split_once('/') {
                if let Some(n) = leading_number(world).and_then(count).filter(|&n| n > 0) {
                    state(&mut job.cluster.gpus, n, line.number);
                }
            }
        } else if t.contains("Padded vocab_size") {
            if let Some(v) = number_after(t, "Padded vocab_size").and_then(count) {
                state(&mut job.model.vocab, v, line.number);
            }
        }
    }
    let mut config = hydra_yaml(text);
    let from_yaml = !config.is_empty();
    for (k, v) in resolved_table(text) {
        config.entry(k).or_insert(v);
    }
    if let Some((name, n)) = config.get("config_class") {
        job.model.name = Some(super::Stated {
            value: name.clone(),
            line: *n,
        });
    }
    if config.is_empty() {
        job.notes.push("no configuration dump (Hydra YAML or Resolved Arguments table): the model and the layout are unknown".into());
    } else if !from_yaml {
        job.notes.push("the Resolved Arguments table lists the arguments a recipe was given, not what its config class sets itself".into());
    }
    apply(&config, &mut job);
    Some(job)
}

/// One `train_step_timing` line (or progress-bar redraw).
fn step(t: &str, line: usize, rank: Option<u32>, job: &mut Job) {
    let Some(seconds) = number_after(t, MARK) else {
        job.skipped.push(format!(
            "line {line}: {MARK} without its value (the line is cut short)"
        ));
        return;
    };
    // `global_step=5.000` (1.x, a float, `2e+3` past a thousand), `global_step: 120` (2.x);
    // else 2.x's `iteration 120/149`.
    let number = number_after(t, "global_step")
        .and_then(|g| (g >= 0.0 && g.fract() == 0.0 && g < 1e18).then_some(g as u64))
        .or_else(|| {
            let at = t.find("iteration ")?;
            let rest = &t[at + "iteration ".len()..];
            let (n, _) = rest.split_once('/')?;
            n.trim().parse().ok()
        });
    let Some(number) = number else {
        job.skipped
            .push(format!("line {line}: {MARK} without a step number"));
        return;
    };
    if seconds <= 0.0 {
        job.skipped.push(format!(
            "line {line}: step {number} has {MARK} {seconds}, not a duration"
        ));
        return;
    }
    let batch = count_after(t, "global_batch_size");
    if let Some(b) = batch {
        state(&mut job.layout.global_batch_size, b, line);
    }
    job.steps.push(Step {
        number,
        value: seconds,
        line,
        rank,
        tflops: None,
        batch,
    });
}

/// NeMo 1.x's config dump: the YAML after `Experiment configuration` (or `Hydra config`),
/// read as dotted paths (`model.tensor_model_parallel_size`) until the first line that is not
/// YAML.
fn hydra_yaml(text: &str) -> Config {
    let mut out = Config::new();
    if !(text.contains("Experiment configuration") || text.contains("Hydra config")) {
        return out;
    }
    let mut started = false;
    let mut armed = false;
    let mut path: Vec<(usize, String)> = Vec::new();
    for line in lines(text) {
        let t: &str = &line.text;
        if !armed {
            armed = t.contains("Experiment configuration") || t.contains("Hydra config");
            continue;
        }
        let indent = t.len() - t.trim_start().len();
        let body = t.trim();
        if body.is_empty() || body.starts_with("- ") || body.starts_with('#') {
            continue;
        }
        let key_value = body.split_once(':').filter(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        });
        match key_value {
            Some((k, v)) if started || indent == 0 => {
                started = true;
                while path.last().is_some_and(|(i, _)| *i >= indent) {
                    path.pop();
                }
                let v = v.trim();
                if v.is_empty() {
                    path.push((indent, k.to_string()));
                } else {
                    let mut full: Vec<&str> = path.iter().map(|(_, p)| p.as_str()).collect();
                    full.push(k);
                    keep_first(&mut out, &full.join("."), v, line.number);
                }
            }
            // The log line that carries the dump comes before the YAML.
            _ if !started => {}
            _ => break,
        }
    }
    // The names [`apply`] reads, from where NeMo 1.x keeps them.
    let mut named = Config::new();
    for (name, paths) in [
        ("num_layers", &["model.num_layers"][..]),
        ("hidden_size", &["model.hidden_size"]),
        ("num_attention_heads", &["model.num_attention_heads"]),
        ("num_query_groups", &["model.num_query_groups"]),
        ("ffn_hidden_size", &["model.ffn_hidden_size"]),
        (
            "seq_length",
            &["model.encoder_seq_length", "model.seq_length"],
        ),
        ("kv_channels", &["model.kv_channels"]),
        ("qk_layernorm", &["model.qk_layernorm"]),
        ("activation", &["model.activation"]),
        (
            "share_embeddings_and_output_weights",
            &["model.share_embeddings_and_output_weights"],
        ),
        (
            "tensor_model_parallel_size",
            &["model.tensor_model_parallel_size"],
        ),
        (
            "pipeline_model_parallel_size",
            &["model.pipeline_model_parallel_size"],
        ),
        (
            "virtual_pipeline_model_parallel_size",
            &["model.virtual_pipeline_model_parallel_size"],
        ),
        ("context_parallel_size", &["model.context_parallel_size"]),
        (
            "expert_model_parallel_size",
            &["model.expert_model_parallel_size"],
        ),
        ("sequence_parallel", &["model.sequence_parallel"]),
        ("global_batch_size", &["model.global_batch_size"]),
        ("micro_batch_size", &["model.micro_batch_size"]),
        ("devices", &["trainer.devices"]),
        ("num_nodes", &["trainer.num_nodes"]),
        ("precision", &["trainer.precision"]),
        ("fp8", &["model.fp8"]),
        (
            "recompute_granularity",
            &["model.activations_checkpoint_granularity"],
        ),
        ("overlap_grad_reduce", &["model.optim.overlap_grad_sync"]),
        ("optimizer_name", &["model.optim.name"]),
        ("num_moe_experts", &["model.num_moe_experts"]),
        ("moe_router_topk", &["model.moe_router_topk"]),
        ("use_flash_attention", &["model.use_flash_attention"]),
    ] {
        if let Some(v) = paths.iter().find_map(|p| out.get(*p)) {
            named.insert(name.to_string(), v.clone());
        }
    }
    named
}

/// NeMo 2.x's `Resolved Arguments` table (NeMo-Run): every `key=value` inside it, the model's
/// config class as `config_class`. Values the table cut (`…`) are left out.
fn resolved_table(text: &str) -> Config {
    let mut out = Config::new();
    if !text.contains("Resolved Arguments") {
        return out;
    }
    let mut inside = false;
    for line in lines(text) {
        let t: &str = &line.text;
        if t.contains("Resolved Arguments") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if t.starts_with('└') {
            break;
        }
        let body: String = t
            .chars()
            .map(|c| {
                if ('\u{2500}'..='\u{257f}').contains(&c) {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        if let Some(at) = body.find("config=") {
            let class: String = body[at + "config=".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !class.is_empty() {
                keep_first(&mut out, "config_class", &class, line.number);
            }
        }
        for piece in body.split([',', '(', ')', ' ']) {
            let Some((k, v)) = piece.split_once('=') else {
                continue;
            };
            let v = v.trim_matches(['\'', '"']);
            if k.is_empty() || v.is_empty() || v.contains('…') {
                continue;
            }
            keep_first(&mut out, k, v, line.number);
        }
    }
    out
}

/// Megatron-Bridge's configuration summary (`ConfigContainer.log_non_default_values`): under
/// `[model] Non-default values (vs Mcore TransformerConfig):` lines `  hidden_size: 128
/// (Mcore default: 0)`, under `[train]:` lines `  global_batch_size: 512`. Fills `job` and
/// says whether the log has one. It lists what differs from Megatron Core's defaults, so a
/// parallel size it leaves out is Megatron Core's default of 1, and missing
/// `num_query_groups` is multi-head attention.
pub fn bridge_summary(text: &str, job: &mut Job) -> bool {
    if !text.contains("Non-default values") {
        return false;
    }
    let mut config = Config::new();
    let mut section = String::new();
    let mut found = false;
    for line in lines(text) {
        let t: &str = &line.text;
        let body = t.trim();
        if let Some(rest) = body.strip_prefix('[') {
            if let Some((name, tail)) = rest.split_once(']') {
                let is_section = tail.contains("Non-default values") || tail.trim() == ":";
                if is_section && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    section = name.to_string();
                    found |= tail.contains("Non-default values");
                    continue;
                }
            }
        }
        if section.is_empty() || !t.starts_with("  ") {
            continue;
        }
        let Some((k, v)) = body.split_once(": ") else {
            continue;
        };
        if !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let v = match v.find("  (Mcore default") {
            Some(end) => &v[..end],
            None => v,
        };
        let v = v.trim().trim_matches(['\'', '"']);
        keep_first(&mut config, k, v, line.number);
    }
    if !found {
        return false;
    }
    apply(&config, job);
    let heads = job.model.heads.as_ref().map(|h| h.value);
    let first = config.values().map(|(_, n)| *n).min().unwrap_or(1);
    let l = &mut job.layout;
    let mut defaulted = Vec::new();
    for (slot, name) in [
        (&mut l.tp, "tensor_model_parallel_size"),
        (&mut l.pp, "pipeline_model_parallel_size"),
        (&mut l.cp, "context_parallel_size"),
        (&mut l.ep, "expert_model_parallel_size"),
    ] {
        if slot.is_none() {
            state(slot, 1, first);
            defaulted.push(name);
        }
    }
    if let (None, Some(h)) = (&job.model.kv_heads, heads) {
        state(&mut job.model.kv_heads, h, first);
        defaulted.push("num_query_groups");
    }
    if !defaulted.is_empty() {
        job.notes.push(format!(
            "Megatron-Bridge's summary lists only non-default values: {} taken as Megatron Core's defaults (1; multi-head attention)",
            defaulted.join(", ")
        ));
    }
    true
}

/// The configuration values NeMo (1.x YAML, 2.x table) and Megatron-Bridge print, under the
/// names Megatron Core gives them.
fn apply(c: &Config, job: &mut Job) {
    model(c, job);
    moe(c, job);
    layout(c, job);
    precision(c, job);
    devices(c, job);
}

/// A value as printed; `None` where absent or unset (`null`, `None`, `~`).
fn get<'a>(c: &'a Config, k: &str) -> Option<(&'a str, usize)> {
    c.get(k)
        .map(|(v, n)| (v.as_str(), *n))
        .filter(|(v, _)| !matches!(*v, "null" | "None" | "~"))
}

/// A positive count.
fn num(c: &Config, k: &str) -> Option<(u32, usize)> {
    let (v, n) = get(c, k)?;
    Some((leading_number(v).and_then(count).filter(|&x| x > 0)?, n))
}

/// A switch, in any case; unset is off.
fn flag(c: &Config, k: &str) -> Option<(bool, usize)> {
    let (v, n) = c.get(k)?;
    match v.to_ascii_lowercase().as_str() {
        "true" => Some((true, *n)),
        "false" | "null" | "none" => Some((false, *n)),
        _ => None,
    }
}

/// The model's shape, its MLP and its embeddings.
fn model(c: &Config, job: &mut Job) {
    let m = &mut job.model;
    for (slot, k) in [
        (&mut m.layers, "num_layers"),
        (&mut m.hidden, "hidden_size"),
        (&mut m.heads, "num_attention_heads"),
        (&mut m.kv_heads, "num_query_groups"),
        (&mut m.ffn_hidden, "ffn_hidden_size"),
        (&mut m.seq_len, "seq_length"),
        (&mut m.vocab, "vocab_size"),
    ] {
        if let Some((v, n)) = num(c, k) {
            state(slot, v, n);
        }
    }
    if let Some((v, n)) = num(c, "sequence_length") {
        state(&mut m.seq_len, v, n);
    }
    if let Some((kv, n)) = num(c, "kv_channels") {
        m.state_head_dim(kv, n);
    }
    if let Some((a, n)) = get(c, "activation") {
        let act = if a.contains("swiglu") || a.contains("geglu") {
            Some(FfnAct::Swiglu)
        } else if a.contains("gelu") {
            Some(FfnAct::Gelu)
        } else {
            None
        };
        if let Some(act) = act {
            state(&mut m.ffn_act, act, n);
        }
    } else if let Some((gated, n)) = flag(c, "gated_linear_unit") {
        state(
            &mut m.ffn_act,
            if gated { FfnAct::Swiglu } else { FfnAct::Gelu },
            n,
        );
    }
    if let Some((tied, n)) = flag(c, "share_embeddings_and_output_weights") {
        state(&mut m.tied_embeddings, tied, n);
    }
    if let Some((on, n)) = flag(c, "qk_layernorm") {
        state(&mut m.qk_norm, on, n);
    }
}

/// Mixture of experts: the expert FFN is the dense one's where no size of its own is given,
/// and top-2 routing is Megatron Core's default.
fn moe(c: &Config, job: &mut Job) {
    let m = &mut job.model;
    if let Some((e, n)) = num(c, "num_moe_experts") {
        let ffn = num(c, "moe_ffn_hidden_size")
            .map(|x| x.0)
            .or(m.ffn_hidden.as_ref().map(|f| f.value));
        if let (true, Some(ffn)) = (e > 1, ffn) {
            let top_k = num(c, "moe_router_topk").map_or(2, |x| x.0);
            state(
                &mut m.moe,
                Some(Moe {
                    experts: e,
                    top_k,
                    shared_experts: 0,
                    expert_ffn_hidden: ffn,
                    dense_layers: 0,
                    n_group: None,
                    topk_group: None,
                    capacity_factor: None,
                    pad_to_capacity: false,
                }),
                n,
            );
        }
    }
}

/// The parallel layout, the batch, the optimizer's sharding and recomputation.
fn layout(c: &Config, job: &mut Job) {
    let l = &mut job.layout;
    for (slot, k) in [
        (&mut l.tp, "tensor_model_parallel_size"),
        (&mut l.pp, "pipeline_model_parallel_size"),
        (
            &mut l.virtual_stages,
            "virtual_pipeline_model_parallel_size",
        ),
        (&mut l.cp, "context_parallel_size"),
        (&mut l.ep, "expert_model_parallel_size"),
        (&mut l.global_batch_size, "global_batch_size"),
        (&mut l.microbatch_size, "micro_batch_size"),
    ] {
        if let Some((v, n)) = num(c, k) {
            state(slot, v, n);
        }
    }
    if l.virtual_stages.is_none() {
        if let Some((_, n)) = get(c, "pipeline_model_parallel_size") {
            if c.contains_key("virtual_pipeline_model_parallel_size") {
                state(&mut l.virtual_stages, 1, n);
            }
        }
    }
    if let Some((on, n)) = flag(c, "sequence_parallel") {
        state(&mut l.sequence_parallel, on, n);
    }
    if let Some((on, n)) = flag(c, "overlap_grad_reduce") {
        state(&mut l.overlap_grad_reduce, on, n);
    }
    if let Some((on, n)) = flag(c, "use_distributed_optimizer") {
        state(&mut l.zero_stage, u8::from(on), n);
    } else if let Some((name, n)) = get(c, "optimizer_name") {
        state(&mut l.zero_stage, u8::from(name.contains("distributed")), n);
    }
    if let Some((r, n)) = c.get("recompute_granularity") {
        let r = match r.as_str() {
            "full" => Some(Recompute::Full),
            "selective" => Some(Recompute::Selective),
            "null" | "None" | "~" => Some(Recompute::None),
            _ => None,
        };
        if let Some(r) = r {
            state(&mut l.recompute, r, *n);
        }
    }
}

/// Precision (fp8 wins over the trainer's precision, which may be fp16, which format 1 has no
/// value for) and the attention kernel.
fn precision(c: &Config, job: &mut Job) {
    let l = &mut job.layout;
    let fp8 = get(c, "fp8").filter(|(v, _)| !v.eq_ignore_ascii_case("false"));
    if let Some((v, n)) = fp8 {
        state(&mut l.precision, Precision::Fp8, n);
        job.notes.push(format!(
            "precision = fp8: the configuration gives fp8 = {v}"
        ));
    } else if let Some((p, n)) = get(c, "precision") {
        if p.contains("bf16") {
            state(&mut l.precision, Precision::Bf16, n);
        } else if p.starts_with("16") {
            job.notes.push(format!("precision null: trainer precision {p} (line {n}) is fp16, which format 1 has no value for"));
        }
    } else if let Some((true, n)) = flag(c, "bf16") {
        state(&mut l.precision, Precision::Bf16, n);
    }
    if let Some((true, n)) = flag(c, "use_flash_attention") {
        state(&mut l.attention, crate::validate::Attention::Flash, n);
    }
}

/// Lightning's devices are per node: the job's GPUs are devices x nodes.
fn devices(c: &Config, job: &mut Job) {
    let cluster = &mut job.cluster;
    let devices = num(c, "devices");
    if let Some((d, n)) = devices {
        state(&mut cluster.gpus_per_node, d, n);
    }
    if let (Some((d, _)), Some((nodes, n))) = (devices, num(c, "num_nodes")) {
        if let Some(g) = d.checked_mul(nodes) {
            state(&mut cluster.gpus, g, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::job::value;

    /// NeMo 1.x's progress bar as it redraws (carriage returns), two ranks, and its config
    /// dump (megatron_gpt_pretraining.py: `OmegaConf.to_yaml(cfg)`).
    const LOG: &str = "[NeMo I 2023-10-01 10:00:00 megatron_gpt_pretraining:37] \n\n************** Experiment configuration ***********\n[NeMo I 2023-10-01 10:00:00 megatron_gpt_pretraining:38] \nname: megatron_gpt\ntrainer:\n  devices: 8\n  num_nodes: 2\n  precision: bf16\nmodel:\n  micro_batch_size: 1\n  global_batch_size: 256\n  tensor_model_parallel_size: 4\n  pipeline_model_parallel_size: 1\n  encoder_seq_length: 2048\n  num_layers: 24\n  hidden_size: 2048\n  ffn_hidden_size: 5440\n  num_attention_heads: 16\n  activation: fast-swiglu\n  share_embeddings_and_output_weights: false\n  activations_checkpoint_granularity: selective\n  optim:\n    name: distributed_fused_adam\n    overlap_grad_sync: true\n[NeMo I 2023-10-01 10:00:05 base:44] Padded vocab_size: 50304, original vocab_size: 50257, dummy tokens: 47.\nEpoch 0: :   0%| | 1/100 [00:10<16:30, reduced_train_loss=10.90, global_step=0.000, consumed_samples=256.0, train_step_timing in s=10.20]\rEpoch 0: :   1%| | 2/100 [00:12<10:00, reduced_train_loss=10.80, global_step=1.000, consumed_samples=512.0, train_step_timing in s=1.230]\n1: Epoch 0: :   1%| | 2/100 [00:12<10:00, reduced_train_loss=10.80, global_step=1.000, consumed_samples=512.0, train_step_timing in s=1.240]\nEpoch 0: :   2%| | 3/100 [00:13<9:00, reduced_train_loss=10.70, global_step=2.000, consumed_samples=768.0, train_step_timing in s=1.220, val_loss=";

    #[test]
    fn progress_bar_and_hydra_config() {
        let job = read(LOG).unwrap();
        assert_eq!(value(&job.cluster.gpus), Some(16));
        assert_eq!(value(&job.cluster.gpus_per_node), Some(8));
        assert_eq!(value(&job.layout.tp), Some(4));
        assert_eq!(value(&job.model.seq_len), Some(2048));
        assert_eq!(value(&job.model.vocab), Some(50304));
        assert_eq!(job.model.ffn_act.as_ref().unwrap().value, FfnAct::Swiglu);
        assert_eq!(value(&job.model.qk_norm), None);
        let normed = LOG.replace(
            "  activation: fast-swiglu",
            "  activation: fast-swiglu\n  qk_layernorm: true",
        );
        assert_eq!(value(&read(&normed).unwrap().model.qk_norm), Some(true));
        assert_eq!(job.layout.zero_stage.as_ref().unwrap().value, 1);
        assert_eq!(
            job.layout.recompute.as_ref().unwrap().value,
            Recompute::Selective
        );
        assert!(job.layout.overlap_grad_reduce.as_ref().unwrap().value);
        let steps: Vec<(u64, f64, Option<u32>)> = job
            .steps
            .iter()
            .map(|s| (s.number, s.value, s.rank))
            .collect();
        assert_eq!(
            steps,
            [
                (0, 10.2, None),
                (1, 1.23, None),
                (1, 1.24, Some(1)),
                (2, 1.22, None)
            ]
        );
        // The line numbers of redrawn bars are the newline-separated line's.
        assert_eq!(job.steps[0].line, job.steps[1].line);
    }

    #[test]
    fn bridge_summary_defaults_what_it_leaves_out() {
        let log = "[model] Non-default values (vs Mcore TransformerConfig):\n  hidden_size: 128  (Mcore default: 0)\n  num_attention_heads: 4  (Mcore default: 0)\n  qk_layernorm: True  (Mcore default: False)\n  tensor_model_parallel_size: 2  (Mcore default: 1)\n\n[train]:\n  global_batch_size: 512\n";
        let mut job = Job::new(Family::MegatronLm, Measure::Seconds, "x");
        assert!(bridge_summary(log, &mut job));
        assert_eq!(value(&job.model.hidden), Some(128));
        assert_eq!(value(&job.layout.tp), Some(2));
        assert_eq!(value(&job.layout.pp), Some(1));
        assert_eq!(value(&job.model.kv_heads), Some(4));
        assert_eq!(value(&job.model.qk_norm), Some(true));
        assert_eq!(value(&job.layout.global_batch_size), Some(512));
        assert!(!bridge_summary("[train]:\n  x: 1\n", &mut job));
    }
}
