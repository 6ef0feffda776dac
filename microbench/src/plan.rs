//! What a run times: the [`Point`]s of a [`Plan`], the [`CopyPath`]s copies move along, and
//! which GEMM types each GPU generation has tensor cores for. The kernels, the sim and the
//! sweeps that build plans all read this module; it reads none of them (issue 10).

use record::{Dtype, Gemm, GemmLayout, Kind, Record};
use std::fmt;

/// A plan: points to time, and how many iterations each.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Points, in the order they are timed.
    pub points: Vec<Point>,
    /// Timed iterations per point (nccl-tests `-n`).
    pub iters: u32,
    /// Untimed iterations first (nccl-tests `-w`).
    pub warmup: u32,
}

/// One timed point of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Point {
    /// An NCCL collective over `gpus` (one rank each) with a per-rank buffer of `bytes`.
    Collective {
        /// all_reduce, all_gather, reduce_scatter, all_to_all or send_recv.
        kind: Kind,
        /// Device indices, in rank order.
        gpus: Vec<u32>,
        /// Per-rank buffer, nccl-tests convention.
        bytes: u64,
        /// Element type.
        dtype: Dtype,
    },
    /// A GEMM on one GPU.
    Gemm {
        /// Device index.
        gpu: u32,
        /// Shape.
        shape: Gemm,
        /// Operand type (accumulation in fp32).
        dtype: Dtype,
        /// Which operands are stored transposed, as cuBLAS sees them (see [`gemm_layouts`]).
        layout: GemmLayout,
    },
    /// A copy of `bytes`.
    Copy {
        /// Between what.
        path: CopyPath,
        /// Buffer size.
        bytes: u64,
    },
}

/// What a copy moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyPath {
    /// GPU to GPU; with `bidirectional`, both copy to each other at once.
    P2p {
        /// Source GPU.
        src: u32,
        /// Destination GPU.
        dst: u32,
        /// Both directions at once.
        bidirectional: bool,
    },
    /// Pinned host memory to a GPU.
    H2d {
        /// Device index.
        gpu: u32,
    },
    /// A GPU to pinned host memory.
    D2h {
        /// Device index.
        gpu: u32,
    },
    /// Within one GPU's memory.
    Hbm {
        /// Device index.
        gpu: u32,
    },
}

impl CopyPath {
    /// The record kind of this copy.
    pub fn kind(self) -> Kind {
        match self {
            CopyPath::P2p { .. } => Kind::P2pCopy,
            CopyPath::H2d { .. } => Kind::H2d,
            CopyPath::D2h { .. } => Kind::D2h,
            CopyPath::Hbm { .. } => Kind::HbmCopy,
        }
    }

    /// GPUs taking part, source first.
    pub fn gpus(self) -> Vec<u32> {
        match self {
            CopyPath::P2p { src, dst, .. } => vec![src, dst],
            CopyPath::H2d { gpu } | CopyPath::D2h { gpu } | CopyPath::Hbm { gpu } => vec![gpu],
        }
    }

    /// The record's `ranks`: GPUs that send (see [`record::busbw_factor`]).
    pub fn senders(self) -> u32 {
        match self {
            CopyPath::P2p {
                bidirectional: true,
                ..
            } => 2,
            _ => 1,
        }
    }
}

impl Point {
    /// GPUs taking part.
    pub fn gpus(&self) -> Vec<u32> {
        match self {
            Point::Collective { gpus, .. } => gpus.clone(),
            Point::Gemm { gpu, .. } => vec![*gpu],
            Point::Copy { path, .. } => path.gpus(),
        }
    }

    /// The record kind.
    pub fn kind(&self) -> Kind {
        match self {
            Point::Collective { kind, .. } => *kind,
            Point::Gemm { .. } => Kind::Gemm,
            Point::Copy { path, .. } => path.kind(),
        }
    }
}

impl Point {
    /// Device memory one GPU of the point needs, as nccl-tests allocates it: send and receive
    /// buffers of a collective (all-gather sends a rank's share and receives the whole,
    /// reduce-scatter the reverse), both ends of a copy, and A, B and C of a GEMM.
    pub fn device_bytes(&self) -> u64 {
        match self {
            Point::Collective {
                kind, gpus, bytes, ..
            } => {
                let share = bytes / (gpus.len().max(1) as u64);
                match kind {
                    Kind::AllGather | Kind::ReduceScatter => bytes.saturating_add(share),
                    _ => bytes.saturating_mul(2),
                }
            }
            Point::Gemm { shape, dtype, .. } => shape.bytes(*dtype),
            Point::Copy { path, bytes } => match path {
                CopyPath::Hbm { .. } => bytes.saturating_mul(2),
                // Each GPU of a peer copy holds one side (both, when both directions run).
                CopyPath::P2p {
                    bidirectional: true,
                    ..
                } => bytes.saturating_mul(2),
                _ => *bytes,
            },
        }
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpus = |g: &[u32]| g.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        match self {
            Point::Collective {
                kind,
                gpus: g,
                bytes,
                dtype,
            } => write!(f, "{kind} {dtype} {bytes} B on GPUs {}", gpus(g)),
            Point::Gemm {
                gpu,
                shape,
                dtype,
                layout,
            } => write!(
                f,
                "gemm {dtype} {layout} {}x{}x{} on GPU {gpu}",
                shape.m, shape.n, shape.k
            ),
            Point::Copy { path, bytes } => match path {
                CopyPath::P2p {
                    src,
                    dst,
                    bidirectional,
                } => {
                    write!(
                        f,
                        "p2p_copy {bytes} B GPU {src} {} GPU {dst}",
                        if *bidirectional { "<->" } else { "->" }
                    )
                }
                other => write!(
                    f,
                    "{} {bytes} B on GPU {}",
                    other.kind(),
                    gpus(&other.gpus())
                ),
            },
        }
    }
}

/// The layouts a training step runs its GEMMs in, as cuBLAS (column-major) sees PyTorch's
/// row-major `y = x.W^T`: `tn` for the forward pass, `nn` for the input gradient (dx = dy.W)
/// and `nt` for the weight gradient (dW = dy^T.x), the order Transformer Engine lists them.
/// fp8 has only `tn`: cuBLASLt's fp8 kernels on Ada and Hopper require A transposed and B
/// not (its documented "TN" requirement), which is why Transformer Engine keeps a transposed
/// copy of each fp8 tensor for the backward GEMMs instead of calling NN or NT.
pub fn gemm_layouts(dtype: Dtype) -> &'static [GemmLayout] {
    match dtype {
        Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => &[GemmLayout::Tn],
        _ => &[GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt],
    }
}

/// The largest L2 cache of the data-centre GPUs of a compute capability, in bytes, from
/// NVIDIA's architecture whitepapers: Volta V100 6 MiB (7.0), Ampere A100 40 MiB (8.0), Ada
/// L40S 96 MiB (8.9), Hopper H100 and H200 50 MiB (9.0). `None` for other generations. NVML
/// does not report L2 and the agent never loads CUDA, so the plan reads it from here.
pub fn l2_bytes_at_most(compute_capability: [u32; 2]) -> Option<u64> {
    const MIB: u64 = 1 << 20;
    match compute_capability {
        [7, 0] => Some(6 * MIB),
        [8, 0] => Some(40 * MIB),
        [8, 9] => Some(96 * MIB),
        [9, 0] => Some(50 * MIB),
        _ => None,
    }
}

/// True for the last record a point yields: a collective yields an out-of-place then an
/// in-place record (nccl-tests' order), every other point one. A reader of streamed records
/// counts finished points with it.
pub fn closes_point(record: &Record) -> bool {
    !record.kind.is_collective() || record.in_place
}
