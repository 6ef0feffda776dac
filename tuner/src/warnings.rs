//! The classic layout pitfalls. Each says the cause and the remedy.

use std::fmt;

use crate::mesh::MoeDispatch;
use crate::placement::LinkClass;

/// A pitfall found in a mesh.
#[derive(Debug, Clone, PartialEq)]
pub enum Pitfall {
    /// A tensor-parallel group leaves its NVLink domain.
    TpBeyondNvlink {
        /// TP size.
        tp: u32,
        /// NVLink domain size.
        domain: u32,
        /// Link the group's all-reduces cross.
        link: LinkClass,
    },
    /// The pipeline bubble is over 10% of the step.
    LargeBubble {
        /// Bubble share.
        fraction: f64,
        /// Stages.
        pp: u32,
        /// Microbatches.
        microbatches: u32,
    },
    /// Fewer microbatches than stages: the pipeline never fills.
    BatchTooSmall {
        /// Microbatches.
        microbatches: u32,
        /// Stages.
        pp: u32,
    },
    /// Less than 5% of GPU memory left.
    LowHeadroom {
        /// Free share.
        headroom: f64,
    },
    /// Experts spread unevenly or too thinly.
    MoeSpread(SpreadReason),
    /// fp8 asked for on a GPU without fp8 tensor cores.
    NoFp8 {
        /// GPU id.
        gpu: &'static str,
    },
    /// Context parallelism, the least validated part of the model, which prices it
    /// optimistically.
    ContextParallel {
        /// CP size.
        cp: u32,
    },
    /// A mixture-of-experts model, whose routing overheads the model does not price.
    MoeOptimistic,
}

/// What is wrong with how a mixture-of-experts layout spreads its experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpreadReason {
    /// The expert-parallel group spans nodes, so its all-to-alls cross the network.
    EpAcrossNodes {
        /// EP size.
        ep: u32,
        /// Nodes the group spans.
        nodes: u32,
        /// How tokens are dispatched, which decides whether a remedy is left to name.
        dispatch: MoeDispatch,
    },
    /// The all-to-all is a large share of the step, and it waits for the busiest expert.
    AllToAllBound {
        /// Exposed all-to-all share of the step.
        share: f64,
        /// The busiest expert's load over the mean.
        imbalance: f64,
    },
    /// Too few tokens reach each expert for its GEMMs to run efficiently.
    StarvedExperts {
        /// Tokens per expert per microbatch.
        tokens_per_expert: f64,
    },
    /// The host launches each local expert's GEMMs on their own, and the step waits for it.
    ExpertLaunches {
        /// Experts on each GPU.
        local_experts: u32,
        /// Exposed host-bound launch share of the step.
        share: f64,
    },
}

impl fmt::Display for SpreadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpreadReason::EpAcrossNodes { ep, nodes, dispatch } => {
                let remedy = match dispatch {
                    MoeDispatch::AllToAll | MoeDispatch::AllGather => "; a deduplicating dispatcher (DeepEP, --moe-dispatch node-dedup) sends each token once per node",
                    MoeDispatch::NodeDedup => "",
                };
                write!(f, "EP={ep} spreads the experts over {nodes} nodes, so every all-to-all crosses the network{remedy}")
            }
            SpreadReason::AllToAllBound { share, imbalance } => write!(
                f,
                "the all-to-all is {:.0}% of the step and waits for the busiest expert ({imbalance:.2}x the mean load): balance the router (auxiliary loss or bias) or cap expert capacity",
                share * 100.0
            ),
            SpreadReason::StarvedExperts { tokens_per_expert } => write!(
                f,
                "only {tokens_per_expert:.0} tokens per expert per microbatch: expert GEMMs starve and routing skew shows"
            ),
            SpreadReason::ExpertLaunches { local_experts, share } => write!(
                f,
                "host-bound launches are {:.0}% of the step, and the host launches a GEMM per expert for each of the {local_experts} experts on a GPU: raise EP so that fewer experts share a GPU",
                share * 100.0
            ),
        }
    }
}

impl fmt::Display for Pitfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pitfall::TpBeyondNvlink { tp, domain, link } => {
                let how = match link {
                    LinkClass::Pcie => "through PCIe",
                    _ => "at the inter-node rate",
                };
                if *domain <= 1 {
                    write!(f, "TP={tp} on a node without NVLink: its all-reduces run {how}; prefer TP=1-2 and more PP or DP")
                } else {
                    write!(f, "TP={tp} is wider than the {domain}-GPU NVLink domain: its all-reduces run {how}; keep TP <= {domain}")
                }
            }
            Pitfall::LargeBubble { fraction, pp, microbatches } => write!(
                f,
                "pipeline bubble is {:.0}% of the step (PP={pp}, {microbatches} microbatches): raise the microbatch count or interleave stages",
                fraction * 100.0
            ),
            Pitfall::BatchTooSmall { microbatches, pp } => write!(
                f,
                "global batch gives {microbatches} microbatches for {pp} pipeline stages: the pipeline never fills; grow the batch or shrink PP"
            ),
            Pitfall::LowHeadroom { headroom } => write!(
                f,
                "only {:.1}% of GPU memory left: fragmentation or a longer sequence will run out; add recomputation or ZeRO sharding",
                headroom * 100.0
            ),
            Pitfall::MoeSpread(reason) => write!(f, "unbalanced MoE spread: {reason}"),
            Pitfall::NoFp8 { gpu } => write!(f, "{gpu} has no fp8 tensor cores: priced at its bf16 peak instead"),
            Pitfall::MoeOptimistic => write!(
                f,
                "MoE step times are optimistic: on Megatron-Bridge's Qwen3-30B-A3B rows on H100 the model is 24% (EP 16) and 28% (PP 2 under combined 1F1B) too fast (`tuner validate --runs tuner/tests/data/megatron-bridge-h100-moe.yaml`): Transformer Engine's fp8 casts, the router's and auxiliary loss's kernels and the per-layer token-count sync are not priced; compare layouts with each other, not with a deadline"
            ),
            Pitfall::ContextParallel { cp } => write!(
                f,
                "CP={cp} is priced from its attention FLOPs and ring exchange, which is optimistic: torchtitan's CP runs at 32k-256k tokens ran slower than priced, the more so the larger CP (`tuner validate --runs data/more-runs.yaml`); compare with the best layout at --cp 1 before launching"
            ),
        }
    }
}
