//! Transformer shapes: parameter counts and FLOP counts.
//!
//! Conventions: bf16 weights, one token = one position of one sequence. Biases and LayerNorm
//! parameters are left out; they are under 0.1% of any catalog model.

use serde::{Deserialize, Serialize};

use crate::error::TunerError;

/// Feed-forward activation, which decides how many projections the MLP has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnAct {
    /// Two projections (up, down): GPT-style.
    Gelu,
    /// Three projections (gate, up, down): Llama-style SwiGLU.
    Swiglu,
}

impl FfnAct {
    /// Weight matrices of size `hidden x ffn_hidden` in one MLP.
    pub fn matrices(self) -> f64 {
        match self {
            FfnAct::Gelu => 2.0,
            FfnAct::Swiglu => 3.0,
        }
    }
}

/// How one layer attends, as Hugging Face's `layer_types` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionType {
    /// Over the last `sliding_window` positions, its own included.
    SlidingAttention,
    /// Over every earlier position.
    FullAttention,
}

/// Mixture-of-experts block replacing the dense MLP in all but the first `dense_layers` layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token visits.
    pub top_k: u32,
    /// Experts every token visits (DeepSeek style); 0 for Mixtral.
    #[serde(default)]
    pub shared_experts: u32,
    /// Hidden size of one expert's MLP.
    pub expert_ffn_hidden: u32,
    /// Leading layers that keep a dense MLP of `ffn_hidden`.
    #[serde(default)]
    pub dense_layers: u32,
    /// Groups the experts are split into for node-limited routing (DeepSeek-V3 §2.1.2:
    /// DeepSeek places one group on each node); `config.json`'s `n_group`.
    #[serde(default)]
    pub n_group: Option<u32>,
    /// Groups each token's experts are chosen from, at most (`config.json`'s `topk_group`:
    /// DeepSeek-V3's tokens reach at most 4 nodes).
    #[serde(default)]
    pub topk_group: Option<u32>,
    /// Tokens one expert takes at most, as a multiple of the mean share (GShard's and
    /// Switch Transformer's capacity factor, Megatron's `--moe-expert-capacity-factor`); the
    /// router drops the rest. Absent: dropless.
    #[serde(default)]
    pub capacity_factor: Option<f64>,
    /// Every expert's input padded to its capacity (Megatron's
    /// `--moe-pad-expert-input-to-capacity`): the exchange and the expert GEMMs carry the
    /// capacity whatever the routing, and no token count waits on the host.
    #[serde(default)]
    pub pad_to_capacity: bool,
}

/// Largest capacity factor taken: past the expert count over top-k every token fits anyway.
const MAX_CAPACITY_FACTOR: f64 = 1024.0;

impl Moe {
    /// The busiest expert's tokens against the mean share where a dropless router leaves
    /// `imbalance`: capped at the capacity where the router drops tokens, and the capacity
    /// itself where every input is padded to it (Fedus et al. 2022, Switch Transformer §2.2:
    /// expert capacity = tokens per expert x capacity factor).
    pub fn load(&self, imbalance: f64) -> f64 {
        match self.capacity_factor {
            Some(c) if self.pad_to_capacity => c,
            Some(c) => imbalance.min(c),
            None => imbalance,
        }
    }

    /// Most nodes one token's experts can span when the EP group covers `nodes` nodes: the
    /// router picks `topk_group` of `n_group` groups, each spread over nodes / n_group nodes
    /// (one node a group where they are equal); no bound without grouped routing.
    pub fn node_limit(&self, nodes: f64) -> Option<f64> {
        match (self.n_group, self.topk_group) {
            (Some(groups), Some(picked)) => {
                Some(f64::from(picked) * (nodes / f64::from(groups)).max(1.0))
            }
            _ => None,
        }
    }
}

/// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, §2.1; DeepSeek-V3, arXiv
/// 2412.19437, §2.1.1): queries and keys/values pass through low-rank latents, and a decoupled
/// rotary key of `qk_rope_head_dim` is shared by all heads. The names are those of DeepSeek's
/// `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    /// Width of the query latent; none where the queries project straight from the hidden
    /// state (DeepSeek-V2-Lite).
    pub q_lora_rank: Option<u32>,
    /// Width of the joint key/value latent.
    pub kv_lora_rank: u32,
    /// Per-head query and key width without rotary embedding.
    pub qk_nope_head_dim: u32,
    /// Per-head width of the rotary part of queries and of the shared rotary key.
    pub qk_rope_head_dim: u32,
    /// Per-head value width.
    pub v_head_dim: u32,
}

/// How tensor parallelism splits a projection's weight (Megatron-Core's linears).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpSplit {
    /// Every rank holds and runs it whole (`parallel_mode="duplicated"`): MLA's
    /// down-projections to its latents, too narrow to split.
    Whole,
    /// Column-parallel: each rank computes its heads' outputs.
    Outputs,
    /// Row-parallel: each rank reduces over its heads' inputs.
    Inputs,
}

/// One weight matrix of a layer: features in and out, and how tensor parallelism splits it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    /// Output features.
    pub outputs: f64,
    /// Input features.
    pub inputs: f64,
    /// Its tensor-parallel split.
    pub split: TpSplit,
}

impl Projection {
    /// Elements of the weight.
    pub fn weights(&self) -> f64 {
        self.outputs * self.inputs
    }

    /// Whether it projects up from one of MLA's latents, not from the `hidden`-wide state.
    pub fn from_latent(&self, hidden: f64) -> bool {
        self.split == TpSplit::Outputs && self.inputs != hidden
    }

    /// (outputs, inputs) on one of `tp` ranks.
    pub fn on_rank(&self, tp: f64) -> (f64, f64) {
        match self.split {
            TpSplit::Whole => (self.outputs, self.inputs),
            TpSplit::Outputs => (self.outputs / tp, self.inputs),
            TpSplit::Inputs => (self.outputs, self.inputs / tp),
        }
    }
}

/// A decoder-only transformer, as published.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    /// Catalog id or the name given in a YAML file.
    pub name: String,
    /// Transformer layers.
    pub layers: u32,
    /// Model width h.
    pub hidden: u32,
    /// Attention (query) heads a.
    pub heads: u32,
    /// Key/value heads (GQA); equal to `heads` for multi-head attention.
    pub kv_heads: u32,
    /// Width of one attention head where it is not `hidden / heads` (Qwen3: 128 at hidden
    /// 2048 and 32 heads, so the query is twice as wide as the model).
    #[serde(default)]
    pub head_dim: Option<u32>,
    /// Dense MLP width f.
    pub ffn_hidden: u32,
    /// MLP activation.
    pub ffn_act: FfnAct,
    /// Vocabulary size V.
    pub vocab: u32,
    /// Training sequence length s.
    pub seq_len: u32,
    /// Whether the output projection shares the input embedding.
    pub tied_embeddings: bool,
    /// Mixture-of-experts block, if any.
    #[serde(default)]
    pub moe: Option<Moe>,
    /// Multi-head latent attention in place of (grouped-query) multi-head attention.
    #[serde(default)]
    pub mla: Option<Mla>,
    /// Multi-token-prediction modules after the last layer (DeepSeek-V3 §2.2, `config.json`'s
    /// `num_nextn_predict_layers`): each a projection of 2h to h and one more layer, sharing
    /// the embedding and the output head. They train but are no part of the model's FLOPs.
    #[serde(default)]
    pub mtp_layers: u32,
    /// Positions a sliding-window layer attends to, its own included (Hugging Face's
    /// `sliding_window`: 128 for GPT-OSS, whose Megatron-Bridge recipe sets
    /// `window_size = (127, 0)`).
    #[serde(default)]
    pub sliding_window: Option<u32>,
    /// Which layers slide, in order, as Hugging Face's `layer_types` lists them; absent under a
    /// window, every layer does (Mistral 7B's `sliding_window` alone).
    #[serde(default)]
    pub layer_types: Option<Vec<AttentionType>>,
    /// An RMSNorm over each query and key head before the rotary embedding (Qwen3's
    /// `q_norm` and `k_norm`, Megatron-Core's `qk_layernorm`, torchtitan's `qk_norm`).
    #[serde(default)]
    pub qk_norm: bool,
}

/// Parameter counts of a model, split the way parallelism shards them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamCount {
    /// Attention, dense MLPs, shared experts and routers of all layers.
    pub dense_layers: f64,
    /// Routed expert weights of all layers.
    pub experts: f64,
    /// Input embedding plus the untied output projection.
    pub embeddings: f64,
    /// The multi-token-prediction modules' own weights but their routed experts (their
    /// embedding and output head are the model's); [`ParamCount::total`] leaves the modules
    /// out, as model cards do.
    pub mtp_dense: f64,
    /// The multi-token-prediction modules' routed expert weights.
    pub mtp_experts: f64,
}

impl ParamCount {
    /// All parameters.
    pub fn total(&self) -> f64 {
        self.dense_layers + self.experts + self.embeddings
    }
}

impl ModelShape {
    /// Checks the shape once, so that later code can divide by its fields.
    pub fn validate(&self) -> Result<(), TunerError> {
        let positive = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("ffn_hidden", self.ffn_hidden),
            ("vocab", self.vocab),
            ("seq_len", self.seq_len),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(self.bad(field, value.to_string(), "a positive integer"));
            }
        }
        match self.head_dim {
            Some(0) => return Err(self.bad("head_dim", "0".into(), "a positive integer")),
            None if self.mla.is_none() && self.hidden % self.heads != 0 => {
                return Err(self.bad(
                    "heads",
                    self.heads.to_string(),
                    "a divisor of hidden, or a head_dim",
                ))
            }
            _ => {}
        }
        if self.heads % self.kv_heads != 0 {
            return Err(self.bad("kv_heads", self.kv_heads.to_string(), "a divisor of heads"));
        }
        if let Some(mla) = &self.mla {
            let widths = [
                ("mla.q_lora_rank", mla.q_lora_rank.unwrap_or(1)),
                ("mla.kv_lora_rank", mla.kv_lora_rank),
                ("mla.qk_nope_head_dim", mla.qk_nope_head_dim),
                ("mla.qk_rope_head_dim", mla.qk_rope_head_dim),
                ("mla.v_head_dim", mla.v_head_dim),
            ];
            for (field, value) in widths {
                if value == 0 {
                    return Err(self.bad(field, "0".into(), "a positive integer"));
                }
            }
            if self.head_dim.is_some() {
                return Err(self.bad(
                    "head_dim",
                    format!("{:?}", self.head_dim),
                    "left out under mla, whose head widths are its own",
                ));
            }
        }
        self.validate_window()?;
        self.validate_qk_norm()?;
        if let Some(moe) = &self.moe {
            if moe.experts == 0 || moe.expert_ffn_hidden == 0 {
                return Err(self.bad(
                    "moe.experts",
                    moe.experts.to_string(),
                    "experts and expert_ffn_hidden above 0",
                ));
            }
            if moe.top_k == 0 || moe.top_k > moe.experts {
                return Err(self.bad(
                    "moe.top_k",
                    moe.top_k.to_string(),
                    "between 1 and moe.experts",
                ));
            }
            if let (Some(groups), Some(picked)) = (moe.n_group, moe.topk_group) {
                if groups == 0 || moe.experts % groups != 0 || picked == 0 || picked > groups {
                    return Err(self.bad(
                        "moe.topk_group",
                        format!("{picked} of n_group {groups}"),
                        "n_group a divisor of the experts, topk_group between 1 and n_group",
                    ));
                }
            } else if moe.n_group.is_some() != moe.topk_group.is_some() {
                return Err(self.bad(
                    "moe.n_group",
                    format!("{:?} with topk_group {:?}", moe.n_group, moe.topk_group),
                    "both set or both left out",
                ));
            }
            if let Some(c) = moe.capacity_factor {
                if !(c > 0.0 && c <= MAX_CAPACITY_FACTOR) {
                    return Err(self.bad(
                        "moe.capacity_factor",
                        c.to_string(),
                        "above 0 and at most 1024, or left out for a dropless router",
                    ));
                }
            } else if moe.pad_to_capacity {
                return Err(self.bad(
                    "moe.pad_to_capacity",
                    "true".into(),
                    "false without moe.capacity_factor: padding needs a capacity",
                ));
            }
            if moe.dense_layers >= self.layers {
                return Err(self.bad(
                    "moe.dense_layers",
                    moe.dense_layers.to_string(),
                    "fewer than layers",
                ));
            }
        }
        Ok(())
    }

    fn validate_qk_norm(&self) -> Result<(), TunerError> {
        if self.qk_norm && self.mla.is_some() {
            return Err(self.bad(
                "qk_norm",
                "true".into(),
                "false under mla: multi-head latent attention normalises its latents, not its heads",
            ));
        }
        Ok(())
    }

    fn validate_window(&self) -> Result<(), TunerError> {
        match (self.sliding_window, &self.layer_types) {
            (Some(0), _) => Err(self.bad(
                "sliding_window",
                "0".into(),
                "a positive number of positions, or left out",
            )),
            (None, Some(_)) => Err(self.bad(
                "layer_types",
                "a list".into(),
                "left out without a sliding_window",
            )),
            (Some(_), Some(types)) if types.len() != self.layers as usize => Err(self.bad(
                "layer_types",
                format!("{} entries", types.len()),
                &format!("one per layer: {}", self.layers),
            )),
            _ => Ok(()),
        }
    }

    /// Layers that attend over a sliding window.
    pub fn sliding_layers(&self) -> u32 {
        match (self.sliding_window, &self.layer_types) {
            (None, _) => 0,
            (Some(_), None) => self.layers,
            (Some(_), Some(types)) => types
                .iter()
                .filter(|&&k| k == AttentionType::SlidingAttention)
                .count() as u32,
        }
    }

    /// Sliding-window attention over `s`-token sequences, where the window binds: the share
    /// of the layers that slide, and the span a causal attention over whole sequences would
    /// need for the same mean keys per query. Under a causal mask a query sees
    /// w - w(w - 1)/(2s) positions on average (Megatron-Bridge's `calculate_swa_context`,
    /// `training/utils/flop_utils.py`), against (s + 1)/2 without a window; the span is twice
    /// that, as Megatron-Bridge's FLOP count doubles it in place of s.
    pub fn sliding(&self, s: f64) -> Option<(f64, f64)> {
        let w = f64::from(self.sliding_window?);
        let sliding = self.sliding_layers();
        (w < s && sliding > 0).then(|| {
            let keys = w - w * (w - 1.0) / (2.0 * s);
            (f64::from(sliding) / f64::from(self.layers), 2.0 * keys)
        })
    }

    fn bad(&self, field: &str, value: String, allowed: &str) -> TunerError {
        TunerError::BadModel {
            model: self.name.clone(),
            field: field.to_string(),
            value,
            allowed: allowed.to_string(),
        }
    }

    /// Width of one attention head's query and key (under MLA, its own and the rotary part).
    pub fn head_dim(&self) -> f64 {
        match &self.mla {
            Some(mla) => f64::from(mla.qk_nope_head_dim + mla.qk_rope_head_dim),
            None => self
                .head_dim
                .map_or(f64::from(self.hidden) / f64::from(self.heads), f64::from),
        }
    }

    /// Width of the queries (and of the keys under MLA): heads x head_dim.
    pub fn q_dim(&self) -> f64 {
        f64::from(self.heads) * self.head_dim()
    }

    /// Width of the values and of the attention output: the query width, but for MLA's
    /// narrower value heads.
    pub fn v_dim(&self) -> f64 {
        match &self.mla {
            Some(mla) => f64::from(self.heads) * f64::from(mla.v_head_dim),
            None => self.q_dim(),
        }
    }

    /// Width of K (or V) as attention reads them: kv_heads x head_dim, or under MLA the mean of
    /// the up-projected keys and values every head gets, so that 2 x kv_dim is both.
    pub fn kv_dim(&self) -> f64 {
        match &self.mla {
            Some(_) => (self.q_dim() + self.v_dim()) / 2.0,
            None => f64::from(self.kv_heads) * self.head_dim(),
        }
    }

    /// Layers with an MoE block.
    pub fn moe_layers(&self) -> u32 {
        self.moe
            .as_ref()
            .map_or(0, |m| self.layers - m.dense_layers)
    }

    /// Attention weights of one layer: Q and O are h x q_dim, K and V are h x kv_dim; under MLA
    /// the projections of [`ModelShape::mla_projections`].
    pub fn attention_params(&self) -> f64 {
        match self.mla_projections() {
            Some(p) => p.map(|p| p.weights()).sum(),
            None => {
                let h = f64::from(self.hidden);
                2.0 * h * self.q_dim() + 2.0 * h * self.kv_dim()
            }
        }
    }

    /// MLA's projections in the order they run (DeepSeek-V2 §2.1.2-2.1.3): the query down-
    /// and up-projection (or one h x q_dim where there is no query latent), the key/value
    /// down-projection with the shared rotary key, the up-projection to every head's key and
    /// value, and the output projection.
    pub fn mla_projections(&self) -> Option<impl Iterator<Item = Projection>> {
        let mla = self.mla.as_ref()?;
        let h = f64::from(self.hidden);
        let heads = f64::from(self.heads);
        let kv_lora = f64::from(mla.kv_lora_rank);
        let p = |outputs, inputs, split| Projection {
            outputs,
            inputs,
            split,
        };
        // The search prices hundreds of thousands of layers: no allocation per call.
        let (q_down, q) = match mla.q_lora_rank {
            Some(r) => (
                Some(p(f64::from(r), h, TpSplit::Whole)),
                p(self.q_dim(), f64::from(r), TpSplit::Outputs),
            ),
            None => (None, p(self.q_dim(), h, TpSplit::Outputs)),
        };
        let rest = [
            q,
            p(kv_lora + f64::from(mla.qk_rope_head_dim), h, TpSplit::Whole),
            p(
                heads * f64::from(mla.qk_nope_head_dim + mla.v_head_dim),
                kv_lora,
                TpSplit::Outputs,
            ),
            p(h, self.v_dim(), TpSplit::Inputs),
        ];
        Some(q_down.into_iter().chain(rest))
    }

    /// Dense MLP weights of one layer.
    pub fn dense_mlp_params(&self) -> f64 {
        self.ffn_act.matrices() * f64::from(self.hidden) * f64::from(self.ffn_hidden)
    }

    /// Elements of each parameter tensor of one dense layer, as the framework module holds
    /// them: a GPT layer (Megatron-DeepSpeed's `ParallelTransformerLayer`) has two LayerNorms
    /// with weight and bias and four biased linears (fused QKV, projection, two MLP), 12
    /// tensors; a Llama layer (Hugging Face `LlamaDecoderLayer`) has two RMSNorm weights and
    /// seven unbiased linears, 9.
    pub fn layer_tensors(&self) -> Vec<f64> {
        let (h, q, kv, f) = (
            f64::from(self.hidden),
            self.q_dim(),
            self.kv_dim(),
            f64::from(self.ffn_hidden),
        );
        if let Some(projections) = self.mla_projections() {
            let mut tensors = vec![h];
            tensors.extend(projections.map(|p| p.weights()));
            tensors.extend([h, f * h, f * h, h * f]);
            return tensors;
        }
        match self.ffn_act {
            FfnAct::Gelu => vec![
                h,
                h,
                (q + 2.0 * kv) * h,
                q + 2.0 * kv,
                q * h,
                h,
                h,
                h,
                f * h,
                f,
                h * f,
                h,
            ],
            FfnAct::Swiglu => vec![h, q * h, kv * h, kv * h, q * h, h, f * h, f * h, h * f],
        }
    }

    /// Weights of one expert.
    pub fn expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            self.ffn_act.matrices() * f64::from(self.hidden) * f64::from(m.expert_ffn_hidden)
        })
    }

    /// Parameters by kind. Routers (h x experts) and shared experts count as dense.
    pub fn params(&self) -> ParamCount {
        let h = f64::from(self.hidden);
        let layers = f64::from(self.layers);
        let moe_layers = f64::from(self.moe_layers());
        let (per_moe_layer_dense, per_moe_layer_experts) = match &self.moe {
            Some(m) => (
                f64::from(m.shared_experts) * self.expert_params() + h * f64::from(m.experts),
                f64::from(m.experts) * self.expert_params(),
            ),
            None => (0.0, 0.0),
        };
        let dense_layers = layers * self.attention_params()
            + (layers - moe_layers) * self.dense_mlp_params()
            + moe_layers * per_moe_layer_dense;
        let embed = f64::from(self.vocab) * h;
        // Each module projects the concatenated [h; h] back to h and runs one layer, an MoE
        // layer where the model has them (DeepSeek-V3's `model.layers.61`).
        let mtp = f64::from(self.mtp_layers);
        let mtp_mlp = if self.moe.is_some() {
            per_moe_layer_dense
        } else {
            self.dense_mlp_params()
        };
        ParamCount {
            dense_layers,
            experts: moe_layers * per_moe_layer_experts,
            embeddings: if self.tied_embeddings {
                embed
            } else {
                2.0 * embed
            },
            mtp_dense: mtp * (2.0 * h * h + self.attention_params() + mtp_mlp),
            mtp_experts: mtp * per_moe_layer_experts,
        }
    }

    /// Parameters one token touches: all but the experts it is not routed to.
    pub fn active_params(&self) -> f64 {
        let p = self.params();
        let routed = self.moe.as_ref().map_or(0.0, |m| {
            f64::from(self.moe_layers()) * f64::from(m.top_k) * self.expert_params()
        });
        p.dense_layers + routed + p.embeddings
    }

    /// MLP width a token passes through in an average layer (top_k routed plus shared experts).
    pub fn mlp_width_per_token(&self, moe_layer: bool) -> f64 {
        match (&self.moe, moe_layer) {
            (Some(m), true) => {
                f64::from(m.top_k + m.shared_experts) * f64::from(m.expert_ffn_hidden)
            }
            _ => f64::from(self.ffn_hidden),
        }
    }

    /// Model FLOPs of one training step (forward + backward, no recomputation) per token.
    ///
    /// 6 FLOPs per active weight per token (2 forward, 4 backward; Kaplan et al. 2020, §2.1),
    /// plus attention scores and values, 2·s·(q_dim + v_dim) forward per token and layer
    /// (4·s·h but for wider heads or MLA's), counted over the full s x s square as Megatron-LM
    /// does (Korthikanti et al. 2022, Eq. 7), times 3; a sliding layer counts the span of
    /// [`ModelShape::sliding`] in place of s. The input embedding is a lookup and
    /// costs no FLOPs; multi-token prediction is training work, not the model's, and is left
    /// out as DeepSeek-V3's MFU leaves it.
    pub fn model_flops_per_token(&self) -> f64 {
        let h = f64::from(self.hidden);
        let s = f64::from(self.seq_len);
        let output_projection = f64::from(self.vocab) * h;
        let span = match self.sliding(s) {
            Some((share, span)) => (1.0 - share) * s + share * span,
            None => s,
        };
        6.0 * (self.active_params() - self.params().embeddings + output_projection)
            + 6.0 * span * (self.q_dim() + self.v_dim()) * f64::from(self.layers)
    }
}

/// Narayanan et al. 2021 (arXiv 2104.04473) Eq. 3: FLOPs of one iteration of a GPT model with
/// full activation recomputation, F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
pub fn narayanan_eq3_flops(batch: f64, seq: f64, layers: f64, hidden: f64, vocab: f64) -> f64 {
    96.0 * batch
        * seq
        * layers
        * hidden
        * hidden
        * (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))
}

/// Korthikanti et al. 2022 (arXiv 2205.05198) Eq. 7: model FLOPs of one iteration, without the
/// recomputation pass, F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).
pub fn korthikanti_eq7_flops(batch: f64, seq: f64, layers: f64, hidden: f64, vocab: f64) -> f64 {
    72.0 * batch
        * seq
        * layers
        * hidden
        * hidden
        * (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn gpt(layers: u32, hidden: u32, heads: u32, seq: u32) -> ModelShape {
        ModelShape {
            name: "gpt".into(),
            layers,
            hidden,
            heads,
            kv_heads: heads,
            head_dim: None,
            ffn_hidden: 4 * hidden,
            ffn_act: FfnAct::Gelu,
            vocab: 51200,
            seq_len: seq,
            tied_embeddings: true,
            moe: None,
            mla: None,
            mtp_layers: 0,
            sliding_window: None,
            layer_types: None,
            qk_norm: false,
        }
    }

    #[test]
    fn gpt_layer_is_twelve_h_squared() {
        // Narayanan et al. 2021 §5.1: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)); without
        // biases, LayerNorms and position embeddings that is 12·l·h² + V·h.
        let m = gpt(96, 12288, 96, 2048);
        let p = m.params();
        assert_eq!(p.dense_layers, 12.0 * 96.0 * 12288.0 * 12288.0);
        assert_eq!(p.embeddings, 51200.0 * 12288.0);
    }

    #[test]
    fn model_flops_match_korthikanti_eq7() {
        let m = gpt(96, 12288, 96, 2048);
        let per_step = m.model_flops_per_token() * 2048.0 * 64.0;
        let eq7 = korthikanti_eq7_flops(64.0, 2048.0, 96.0, 12288.0, 51200.0);
        assert!((per_step / eq7 - 1.0).abs() < 1e-12, "{per_step} vs {eq7}");
    }

    #[test]
    fn eq3_is_eq7_plus_a_forward_pass() {
        // Eq. 3 counts 4 passes (forward, recompute, 2x backward), Eq. 7 counts 3; with the
        // logit layer not recomputed the ratio is exactly 4/3 only without vocabulary.
        let eq3 = narayanan_eq3_flops(1.0, 2048.0, 96.0, 12288.0, 0.0);
        let eq7 = korthikanti_eq7_flops(1.0, 2048.0, 96.0, 12288.0, 0.0);
        assert!((eq3 / eq7 - 4.0 / 3.0).abs() < 1e-12);
    }

    /// Qwen3-30B-A3B as the catalog holds it.
    fn qwen3_30b_a3b() -> ModelShape {
        crate::catalog::model("qwen3-30b-a3b").unwrap().shape
    }

    /// GPT-OSS-120B as the catalog holds it.
    fn gpt_oss_120b() -> ModelShape {
        crate::catalog::model("gpt-oss-120b").unwrap().shape
    }

    #[test]
    fn a_sliding_window_counts_the_positions_it_sees() {
        // OpenAI's gpt-oss model card (arXiv 2508.10925, Table 1): 116.83B parameters, 5.13B
        // active.
        let m = gpt_oss_120b();
        m.validate().unwrap();
        assert!(
            (m.params().total() / 116.83e9 - 1.0).abs() < 0.005,
            "{}",
            m.params().total()
        );
        // The card's active count leaves out the input embedding, a lookup.
        let active = m.active_params() - 201088.0 * 2880.0;
        assert!((active / 5.13e9 - 1.0).abs() < 0.005, "{active}");
        assert_eq!(m.sliding_layers(), 18);
        // 18 full layers over 4,096 positions and 18 sliding ones over a span of 252.03
        // (2 x (128 - 128 x 127 / 8,192)): 6 x (4,096 + 4,096) x (18 x 4,096 + 18 x 252.03)
        // attention FLOPs a token, 3.84 GFLOP, against 7.25 GFLOP were every layer full.
        let attention = m.model_flops_per_token()
            - 6.0 * (m.active_params() - m.params().embeddings + 201088.0 * 2880.0);
        let want = 6.0 * 8192.0 * (18.0 * 4096.0 + 18.0 * 252.03125);
        assert!(
            (attention / want - 1.0).abs() < 1e-9,
            "{attention} vs {want}"
        );
        // What the shape check refuses, by field.
        let err = |m: ModelShape| m.validate().unwrap_err().to_string();
        let e = err(ModelShape {
            sliding_window: Some(0),
            ..m.clone()
        });
        assert!(e.contains("sliding_window = 0"), "{e}");
        let e = err(ModelShape {
            sliding_window: None,
            ..m.clone()
        });
        assert!(
            e.contains("layer_types") && e.contains("left out without a sliding_window"),
            "{e}"
        );
        let e = err(ModelShape {
            layers: 24,
            ..m.clone()
        });
        assert!(
            e.contains("layer_types = 36 entries") && e.contains("one per layer: 24"),
            "{e}"
        );
    }

    #[test]
    fn a_wide_head_counts_the_parameters_its_model_card_states() {
        // Qwen's cards: 30.5B parameters, 3.3B activated. The query is 32 x 128 = 4096 wide at
        // hidden 2048; priced at hidden / heads = 64 the active count would be 2.9B.
        let m = qwen3_30b_a3b();
        m.validate().unwrap();
        assert_eq!(m.q_dim(), 4096.0);
        assert!(
            (m.params().total() / 30.5e9 - 1.0).abs() < 0.005,
            "{}",
            m.params().total()
        );
        assert!(
            (m.active_params() / 3.3e9 - 1.0).abs() < 0.02,
            "{}",
            m.active_params()
        );
        // Bridge's published 206 model TFLOP/s at 8,960 tokens/s per GPU is 23.0 GFLOP a
        // token: 6 x (active weights less the embedding, plus the output layer) and the
        // causal half of the 12·s·q·l attention term.
        let causal = m.model_flops_per_token() - 6.0 * 4096.0 * 4096.0 * 48.0;
        assert!((causal / (206e12 / 8960.0) - 1.0).abs() < 0.01, "{causal}");
        // Qwen3-235B-A22B's card: 235B, 22B activated.
        let big = crate::catalog::model("qwen3-235b-a22b").unwrap().shape;
        assert!((big.params().total() / 235e9 - 1.0).abs() < 0.005);
        assert!((big.active_params() / 22e9 - 1.0).abs() < 0.02);
        let odd = ModelShape {
            heads: 24,
            head_dim: None,
            ..m.clone()
        };
        assert!(odd.validate().is_err());
        assert!(ModelShape {
            head_dim: Some(0),
            ..m
        }
        .validate()
        .is_err());
    }

    /// Switch Transformer §2.2: an expert takes at most capacity factor x tokens / experts.
    /// Dropless, the busiest expert carries the imbalance left; a capacity caps it; padding
    /// to the capacity carries it whatever the routing, balanced or not.
    #[test]
    fn the_busiest_expert_carries_its_capacity_or_the_imbalance() {
        let base = qwen3_30b_a3b().moe.unwrap();
        let with = |capacity_factor, pad_to_capacity| Moe {
            capacity_factor,
            pad_to_capacity,
            ..base.clone()
        };
        assert_eq!(with(None, false).load(1.25), 1.25);
        assert_eq!(with(Some(1.0), false).load(1.25), 1.0);
        assert_eq!(with(Some(2.0), false).load(1.25), 1.25);
        assert_eq!(with(Some(2.0), true).load(1.25), 2.0);
        assert_eq!(with(Some(1.5), true).load(1.0), 1.5);
        let model = |moe| ModelShape {
            moe: Some(moe),
            ..qwen3_30b_a3b()
        };
        for (moe, field) in [
            (with(Some(0.0), false), "moe.capacity_factor"),
            (with(Some(f64::NAN), false), "moe.capacity_factor"),
            (with(None, true), "moe.pad_to_capacity"),
        ] {
            let err = model(moe).validate().unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
        model(with(Some(1.25), true)).validate().unwrap();
    }

    fn deepseek_v3() -> ModelShape {
        crate::catalog::model("deepseek-v3").unwrap().shape
    }

    #[test]
    fn mla_counts_deepseek_v3_s_projections() {
        // config.json: W_DQ 7168 x 1536, W_UQ 1536 x 128·(128 + 64), W_DKV 7168 x (512 + 64),
        // W_UKV 512 x 128·(128 + 128), W_O 128·128 x 7168.
        let m = deepseek_v3();
        m.validate().unwrap();
        let per_layer = 11_010_048.0 + 37_748_736.0 + 4_128_768.0 + 16_777_216.0 + 117_440_512.0;
        assert_eq!(m.attention_params(), per_layer);
        assert_eq!(
            (m.q_dim(), m.v_dim(), m.head_dim()),
            (24576.0, 16384.0, 192.0)
        );
        // The report's 671B total and 37B activated; with the MTP module's own 11.6B and its
        // copy of the embedding and head, Hugging Face's 685B checkpoint.
        let p = m.params();
        assert!((p.total() / 671.0e9 - 1.0).abs() < 0.001, "{}", p.total());
        assert!(
            (m.active_params() / 37.0e9 - 1.0).abs() < 0.02,
            "{}",
            m.active_params()
        );
        let checkpoint = p.total() + p.mtp_dense + p.mtp_experts + p.embeddings;
        assert!((checkpoint / 685.0e9 - 1.0).abs() < 0.002, "{checkpoint}");
    }

    #[test]
    fn deepseek_v3_flops_match_its_isca_figures() {
        // ISCA '25 (arXiv 2505.09343): 432 non-causal and 385 causal TFLOPS per H800 at
        // 19.926 s a step of 15,360 x 4,096 tokens on 2,048 GPUs, MTP left out.
        let m = deepseek_v3();
        let tokens = 15360.0 * 4096.0;
        let per_token = |tflops: f64| tflops * 1e12 * 2048.0 * 19.926 / tokens;
        let full = m.model_flops_per_token();
        assert!((full / per_token(432.0) - 1.0).abs() < 0.005, "{full}");
        // Causal: half the score and value FLOPs, 3·s·(q_dim + v_dim) a layer.
        let causal = full - 3.0 * 4096.0 * (24576.0 + 16384.0) * 61.0;
        assert!((causal / per_token(385.0) - 1.0).abs() < 0.005, "{causal}");
    }

    #[test]
    fn bad_mla_and_group_widths_are_named() {
        let m = deepseek_v3();
        let mut zero = m.clone();
        zero.mla.as_mut().unwrap().kv_lora_rank = 0;
        assert!(zero
            .validate()
            .unwrap_err()
            .to_string()
            .contains("mla.kv_lora_rank"));
        let mut wide = m.clone();
        wide.head_dim = Some(128);
        assert!(wide
            .validate()
            .unwrap_err()
            .to_string()
            .contains("head_dim"));
        let mut groups = m;
        groups.moe.as_mut().unwrap().topk_group = Some(9);
        assert!(groups
            .validate()
            .unwrap_err()
            .to_string()
            .contains("moe.topk_group"));
        groups.moe.as_mut().unwrap().topk_group = None;
        assert!(groups
            .validate()
            .unwrap_err()
            .to_string()
            .contains("moe.n_group"));
    }

    #[test]
    fn query_and_key_norms_are_for_heads_not_latents() {
        let qwen3 = qwen3_30b_a3b();
        assert!(qwen3.qk_norm);
        qwen3.validate().unwrap();
        let mut ds = crate::catalog::model("deepseek-v3").unwrap().shape;
        ds.qk_norm = true;
        let e = ds.validate().unwrap_err().to_string();
        assert!(
            e.contains("qk_norm") && e.contains("false under mla"),
            "{e}"
        );
    }
}
