//! What can go wrong when discovering or measuring. Each message names what is missing or
//! which value is wrong, and what would be accepted.

use nvml_wrapper::error::NvmlError;

/// The library's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No NVIDIA driver (NVML or libcuda cannot be loaded, or the kernel module is absent).
    #[error("no NVIDIA driver: {0}")]
    NoDriver(String),
    /// A CUDA library the kernels need does not load under any of its names.
    #[error("{library} not found: {tried}: {hint}")]
    MissingLibrary {
        /// The library, e.g. `NCCL`.
        library: &'static str,
        /// The file names tried and why the last failed.
        tried: String,
        /// Where it usually comes from.
        hint: &'static str,
    },
    /// A library loaded but lacks symbols microbench calls (an older release than it needs).
    #[error("{file} lacks {symbols}: {hint}")]
    MissingSymbols {
        /// The name it loaded under and its path.
        file: String,
        /// Every missing symbol, comma-separated.
        symbols: String,
        /// Where a complete one comes from.
        hint: &'static str,
    },
    /// The test needs more GPUs than the node has.
    #[error("{what} needs {needed} GPUs; this node has {found}")]
    TooFewGpus {
        /// What was asked for.
        what: String,
        /// GPUs it needs.
        needed: usize,
        /// GPUs present.
        found: usize,
    },
    /// A GPU index outside the node.
    #[error("{field} {gpu}: no such GPU; this node has {count} (0-{})", .count.saturating_sub(1))]
    NoSuchGpu {
        /// The option or field that named it.
        field: &'static str,
        /// The index given.
        gpu: u32,
        /// GPUs present.
        count: usize,
    },
    /// An NVML query failed.
    #[error("NVML {call}{}: {source}", .gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default())]
    Nvml {
        /// The NVML call.
        call: &'static str,
        /// The GPU it was about.
        gpu: Option<u32>,
        /// NVML's error.
        source: NvmlError,
    },
    /// The CUDA driver is loaded but does not start (no device, or a driver too old for the
    /// CUDA version).
    #[error("CUDA did not start: {0}")]
    CudaInit(String),
    /// A CUDA, cuBLAS or NCCL call failed.
    #[error("{call} on GPU {gpu}: {message}")]
    Cuda {
        /// The call.
        call: &'static str,
        /// The GPU.
        gpu: u32,
        /// The library's message.
        message: String,
    },
    /// A measurement the GPU cannot run (e.g. fp8 before compute capability 8.9).
    #[error("{what} is not supported on GPU {gpu} ({reason})")]
    Unsupported {
        /// What was asked for.
        what: String,
        /// The GPU.
        gpu: u32,
        /// Why not.
        reason: String,
    },
    /// A point ran but its numbers cannot make a record (a time of 0, a rate that is not
    /// finite): the point fails rather than write what a reader would refuse.
    #[error("{point}: not recorded, {source}")]
    Unrecordable {
        /// The point, as text.
        point: String,
        /// The field and value that are wrong.
        source: record::Invalid,
    },
    /// The multi-node rendezvous failed: a rank missing, unreachable or inconsistent.
    #[error("rendezvous at {at}: {message}")]
    Rendezvous {
        /// `MASTER_ADDR:MASTER_PORT`.
        at: String,
        /// What went wrong, naming the ranks and hosts.
        message: String,
    },
    /// The ranks of a multi-node job do not form a job that can run.
    #[error("job: {0}")]
    Job(String),
    /// A bad plan or option value.
    #[error("{field} `{value}`: {expected}")]
    BadValue {
        /// The option or field.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: String,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
