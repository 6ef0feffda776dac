//! The closed vocabularies of a record: what was timed, by what, where, and with which clock.

named_enum! {
    /// What a record timed.
    Kind, "kind" {
        /// A matrix multiply on one GPU.
        Gemm => "gemm",
        /// NCCL all-reduce.
        AllReduce => "all_reduce",
        /// NCCL all-gather.
        AllGather => "all_gather",
        /// NCCL reduce-scatter.
        ReduceScatter => "reduce_scatter",
        /// All-to-all as grouped NCCL send/recv.
        AllToAll => "all_to_all",
        /// NCCL send/recv in a ring (each rank sends to the next).
        SendRecv => "send_recv",
        /// A peer-to-peer copy between two GPUs.
        P2pCopy => "p2p_copy",
        /// Host (pinned) to device copy.
        H2d => "h2d",
        /// Device to host (pinned) copy.
        D2h => "d2h",
        /// Device to device copy within one GPU's memory.
        HbmCopy => "hbm_copy",
        /// A fused attention kernel on one GPU (FlashAttention and its kin), timed by the
        /// shape in `detail.attention`.
        Attention => "attention",
    }
}

impl Kind {
    /// The NCCL collectives, which nccl-tests tables describe.
    pub const COLLECTIVES: [Kind; 5] = [
        Kind::AllReduce,
        Kind::AllGather,
        Kind::ReduceScatter,
        Kind::AllToAll,
        Kind::SendRecv,
    ];

    /// True for the NCCL collectives.
    pub fn is_collective(self) -> bool {
        Kind::COLLECTIVES.contains(&self)
    }
}

named_enum! {
    /// What produced a record. A `sim` record is a model, never a measurement of hardware.
    Backend, "backend" {
        /// NCCL collectives.
        Nccl => "nccl",
        /// CUDA kernels and copies (cuBLAS for GEMM).
        Cuda => "cuda",
        /// Host-side code only.
        Cpu => "cpu",
        /// MPI collectives.
        Mpi => "mpi",
        /// The physical model of microbench's sim backend.
        Sim => "sim",
    }
}

named_enum! {
    /// Whether the GPUs taking part share a node.
    Scope, "scope" {
        /// All GPUs in one node.
        IntraNode => "intra_node",
        /// GPUs in more than one node.
        InterNode => "inter_node",
    }
}

named_enum! {
    /// How a time was taken; design.md asks every measurement to say which.
    Clock, "clock" {
        /// CUDA events recorded on the stream around the timed iterations.
        CudaEvent => "cuda_event",
        /// The host's monotonic clock around a synchronised batch of iterations.
        Host => "host",
        /// The mean time that nccl-tests printed (its own CUDA-event timing).
        NcclTests => "nccl_tests",
        /// Not a clock: the sim backend's model.
        Model => "model",
        /// A table another tool wrote (a GEMM sweep, attention timings, a lookup table): its
        /// own timer, whatever it was.
        Imported => "imported",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for kind in Kind::ALL {
            assert_eq!(kind.as_str().parse::<Kind>().unwrap(), *kind);
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }

    #[test]
    fn unknown_name_lists_the_allowed_ones() {
        let err = "allreduce".parse::<Kind>().unwrap_err().to_string();
        assert!(
            err.starts_with("kind `allreduce`: expected one of gemm, all_reduce"),
            "{err}"
        );
    }
}

named_enum! {
    /// Which pass of an attention kernel a time covers.
    AttentionPass, "pass" {
        /// The forward kernel.
        Fwd => "fwd",
        /// The backward kernel.
        Bwd => "bwd",
        /// Forward and backward together, as FlashAttention's benchmarks time them.
        FwdBwd => "fwd_bwd",
    }
}

named_enum! {
    /// GEMM operand layout in BLAS terms (column-major op(A), op(B)). A linear layer's forward
    /// `x . W^T` reaches cuBLAS as `tn`, its input gradient as `nn` and its weight gradient as
    /// `nt`, so these three are the layouts training runs.
    GemmLayout, "layout" {
        /// Neither operand transposed.
        Nn => "nn",
        /// B transposed.
        Nt => "nt",
        /// A transposed.
        Tn => "tn",
    }
}
