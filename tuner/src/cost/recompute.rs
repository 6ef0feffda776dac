//! What activation recomputation replays of a layer in the backward pass, as each framework
//! runs it.

use super::layer::{launch_excess, Layer};
use crate::mesh::Recompute;

/// What recomputation replays of one layer in backward, per microbatch.
pub(super) struct Replay {
    /// GPU time of the replayed kernels.
    pub gpu: f64,
    /// Host-bound time beyond it.
    pub launch: f64,
    /// Passes of the tensor-parallel collectives replayed.
    pub tp_passes: f64,
    /// Passes of the other collectives (all-to-all, ring exchange) replayed.
    pub comm_passes: f64,
    /// Attention core replayed, which the ring exchange can hide behind.
    pub attention: f64,
}

/// Kernels that torchtitan's per-op selective checkpointing does not replay: the four
/// saved matmuls and the attention core.
const OP_SAC_SAVED_KERNELS: f64 = 5.0;

/// How a job recomputes: the mode, and the facts of the framework and layout it depends on.
#[derive(Clone, Copy)]
pub(super) struct Recomputing {
    /// The mode.
    pub mode: Recompute,
    /// Whether the framework runs selective recomputation per op (torchtitan).
    pub per_op: bool,
    /// Sequence-parallel reduce-scatters a layer's forward runs (0 without it), each with its
    /// re-layout copy where DTensor makes one.
    pub scatters: f64,
    /// The share of a forward pass that full recomputation costs
    /// (`Efficiency::recompute_pass`).
    pub pass: f64,
    /// Whether the layer's attention is MLA, whose selective recomputation is DeepSeek-V3's.
    pub mla: bool,
}

/// The recomputation of one average layer `avg`, whose exposed collectives take `comm` and
/// whose kernels take `host` seconds each to issue. Megatron's selective recomputation
/// replays the attention core (Korthikanti et al. 2022 §5); torchtitan's ("selective",
/// `selective_ac_option = "op"`) replays every op but the attention and every other matmul,
/// and the all-gathers of sequence parallelism, not the reduce-scatters, whose outputs it
/// saves; full recomputation replays the whole forward with its collectives.
pub(super) fn replay(r: Recomputing, avg: &Layer, comm: f64, host: f64) -> Replay {
    let none = Replay {
        gpu: 0.0,
        launch: 0.0,
        tp_passes: 0.0,
        comm_passes: 0.0,
        attention: 0.0,
    };
    match r.mode {
        Recompute::None => none,
        _ if r.per_op => {
            let gpu = avg.op_sac_gemm + avg.elementwise;
            let kernels = (avg.kernels - OP_SAC_SAVED_KERNELS - r.scatters).max(0.0);
            Replay {
                gpu,
                launch: launch_excess(gpu + avg.tp_replayed, kernels, host),
                tp_passes: if avg.tp > 0.0 {
                    avg.tp_replayed / avg.tp
                } else {
                    0.0
                },
                ..none
            }
        }
        // DeepSeek-V3 (§3.2.3) recomputes every RMSNorm and MLA's up-projections in backward
        // and keeps the attention core's output (Megatron-Core's `--recompute-modules
        // layernorm mla_up_proj`); the norms' HBM traffic is left out, a few bytes a hidden
        // element beside the GEMMs.
        Recompute::Selective if r.mla => Replay {
            gpu: avg.mla_up,
            ..none
        },
        Recompute::Selective => Replay {
            gpu: avg.attention,
            attention: avg.attention,
            ..none
        },
        Recompute::Full => {
            let gpu = avg.fwd() * r.pass;
            Replay {
                gpu,
                launch: launch_excess(gpu + comm, avg.kernels, host),
                tp_passes: 1.0,
                comm_passes: 1.0,
                attention: avg.attention,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer() -> Layer {
        Layer {
            gemm: 10.0,
            gemm_bwd: 20.0,
            attention: 3.0,
            attention_bwd: 7.0,
            elementwise: 2.0,
            op_sac_gemm: 4.0,
            tp: 5.0,
            tp_replayed: 2.0,
            a2a: 0.0,
            cp: 0.0,
            kernels: 20.0,
            mla_up: 1.5,
        }
    }

    fn recomputing(mode: Recompute, per_op: bool) -> Recomputing {
        Recomputing {
            mode,
            per_op,
            scatters: 2.0,
            pass: 0.8,
            mla: false,
        }
    }

    #[test]
    fn megatron_selective_replays_the_attention_core_alone() {
        let r = replay(recomputing(Recompute::Selective, false), &layer(), 5.0, 1.0);
        assert_eq!((r.gpu, r.attention, r.launch), (3.0, 3.0, 0.0));
        assert_eq!((r.tp_passes, r.comm_passes), (0.0, 0.0));
    }

    #[test]
    fn mla_selective_replays_the_up_projections_and_keeps_the_attention() {
        let mla = Recomputing {
            mla: true,
            ..recomputing(Recompute::Selective, false)
        };
        let r = replay(mla, &layer(), 5.0, 1.0);
        assert_eq!((r.gpu, r.attention, r.launch), (1.5, 0.0, 0.0));
    }

    #[test]
    fn full_replays_its_share_of_the_forward_with_its_collectives() {
        // 0.8 x (10 + 3 + 2) = 12 s of kernels; 20 kernels at 1 s beside 12 + 5 s of work.
        let r = replay(recomputing(Recompute::Full, false), &layer(), 5.0, 1.0);
        assert!((r.gpu - 12.0).abs() < 1e-12);
        assert!((r.launch - 3.0).abs() < 1e-12);
        assert_eq!((r.tp_passes, r.comm_passes, r.attention), (1.0, 1.0, 3.0));
    }

    #[test]
    fn per_op_replays_every_other_matmul_and_the_gathers() {
        // 4 + 2 s of kernels; 20 - 5 saved - 2 scatters = 13 kernels at 1 s beside 6 + 2 s.
        let r = replay(recomputing(Recompute::Selective, true), &layer(), 5.0, 1.0);
        assert_eq!((r.gpu, r.launch), (6.0, 5.0));
        assert_eq!((r.tp_passes, r.comm_passes, r.attention), (0.4, 0.0, 0.0));
    }
}
