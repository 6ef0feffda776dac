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
            None if self.hidden % self.heads != 0 => {
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

    fn bad(&self, field: &str, value: String, allowed: &str) -> TunerError {
        TunerError::BadModel {
            model: self.name.clone(),
            field: field.to_string(),
            value,
            allowed: allowed.to_string(),
        }
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> f64 {
        self.head_dim
            .map_or(f64::from(self.hidden) / f64::from(self.heads), f64::from)
    }

    /// Width of the query projection and of the attention output: heads x head_dim.
    pub fn q_dim(&self) -> f64 {
        f64::from(self.heads) * self.head_dim()
    }

    /// Width of the K (or V) projection: kv_heads x head_dim.
    pub fn kv_dim(&self) -> f64 {
        f64::from(self.kv_heads) * self.head_dim()
    }

    /// Layers with an MoE block.
    pub fn moe_layers(&self) -> u32 {
        self.moe
            .as_ref()
            .map_or(0, |m| self.layers - m.dense_layers)
    }

    /// Attention weights of one layer: Q and O are h x q_dim, K and V are h x kv_dim.
    pub fn attention_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        2.0 * h * self.q_dim() + 2.0 * h * self.kv_dim()
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
        ParamCount {
            dense_layers,
            experts: moe_layers * per_moe_layer_experts,
            embeddings: if self.tied_embeddings {
                embed
            } else {
                2.0 * embed
            },
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
    /// plus attention scores and values, 4·s·q_dim forward per token and layer (q_dim = h but
    /// for a wider head), counted over the full s x s square as Megatron-LM does (Korthikanti
    /// et al. 2022, Eq. 7), times 3. The input embedding is a lookup and costs no FLOPs.
    pub fn model_flops_per_token(&self) -> f64 {
        let h = f64::from(self.hidden);
        let s = f64::from(self.seq_len);
        let output_projection = f64::from(self.vocab) * h;
        6.0 * (self.active_params() - self.params().embeddings + output_projection)
            + 12.0 * s * self.q_dim() * f64::from(self.layers)
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
mod tests {
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

    /// Qwen3-30B-A3B (Hugging Face `config.json`): hidden 2048, 32 query heads of 128 and 4
    /// KV heads, 48 layers of 128 experts (top 8, width 768), untied 151,936-token vocabulary.
    fn qwen3_30b_a3b() -> ModelShape {
        ModelShape {
            name: "qwen3-30b-a3b".into(),
            layers: 48,
            hidden: 2048,
            heads: 32,
            kv_heads: 4,
            head_dim: Some(128),
            ffn_hidden: 6144,
            ffn_act: FfnAct::Swiglu,
            vocab: 151936,
            seq_len: 4096,
            tied_embeddings: false,
            moe: Some(Moe {
                experts: 128,
                top_k: 8,
                shared_experts: 0,
                expert_ffn_hidden: 768,
                dense_layers: 0,
            }),
        }
    }

    #[test]
    fn a_wide_head_counts_the_parameters_its_model_card_states() {
        // Qwen's card: 30.5B parameters, 3.3B activated. The query is 32 x 128 = 4096 wide at
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
}
