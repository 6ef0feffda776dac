//! The output layer and the cross-entropy over its logits, which the last stage runs.

use super::compute::ComputeModel;
use crate::mesh::LossKernel;

/// Forward and backward seconds of the output layer over `t` tokens from `hidden` features
/// to `vocab / tp` logits, in bf16 whatever the training precision
/// ([`ComputeModel::bf16_linear_s`]), and of the loss over them.
pub(super) fn output_layer_s(
    c: &dyn ComputeModel,
    loss: LossKernel,
    t: f64,
    (hidden, vocab, tp): (f64, f64, f64),
) -> f64 {
    let (logits_fwd, logits_bwd) = c.bf16_linear_s(t, vocab / tp, hidden);
    logits_fwd + logits_bwd + c.memory_s(loss.bytes_per_logit() * t * vocab / tp)
}

impl LossKernel {
    /// HBM bytes per logit, forward and backward, counted kernel by kernel.
    ///
    /// Megatron (`megatron/core/tensor_parallel/cross_entropy.py` at core_r0.8.0; the same
    /// ops in Megatron-LM and Megatron-DeepSpeed): the cast from bf16 (2 read, 4 written), max
    /// (4), subtract in place (8), exp in place (8), sum (4), divide in place (8); backward
    /// multiplies in place (8) and autograd casts the gradient back to bf16 (4 + 2): 52.
    /// Eager PyTorch: the cast (6), `log_softmax` over a row too long for shared memory in
    /// three passes (max, sum, then read and write: 16), `nll_loss` backward filling a dense
    /// fp32 gradient (4), `log_softmax` backward (the gradient summed, then it and the output
    /// read and the result written: 16), the cast back (6): 48. Fused, as flash-attn's
    /// `xentropy` runs: the bf16 logits read for the max and again for the sum, and once more
    /// to write the bf16 gradient: 8. Transformer Engine's fused loss is priced the same,
    /// uncounted.
    pub fn bytes_per_logit(self) -> f64 {
        match self {
            LossKernel::Megatron => 52.0,
            LossKernel::Eager => 48.0,
            LossKernel::Fused => 8.0,
        }
    }

    /// Bytes per logit held at the start of backward: Megatron's vocab-parallel cross-entropy
    /// saves its fp32 softmax (4); `cross_entropy(logits.float())` holds the bf16 logits,
    /// their fp32 copy and the fp32 log-softmax (10); flash-attn's fused `CrossEntropyLoss`
    /// (llm-foundry's `fused_crossentropy`) saves the bf16 logits and writes a bf16 gradient
    /// beside them (4; Transformer Engine's writes the gradient into the logits, priced the
    /// same).
    pub fn held_bytes_per_logit(self) -> f64 {
        match self {
            LossKernel::Eager => 10.0,
            LossKernel::Megatron | LossKernel::Fused => 4.0,
        }
    }
}
