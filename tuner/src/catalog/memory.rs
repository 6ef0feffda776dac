//! Memory figures outside the model's own tensors: mixed-precision Adam's bytes per parameter
//! and the allocations of the runtime under it (NCCL, the CUDA context, the caching
//! allocator). Each with its source.

/// Bytes per parameter of mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3.1):
/// bf16 weights (2), bf16 gradients (2), fp32 master weights, momentum and variance (12).
pub const WEIGHT_BYTES: f64 = 2.0;
/// See [`WEIGHT_BYTES`].
pub const GRAD_BYTES: f64 = 2.0;
/// See [`WEIGHT_BYTES`].
pub const OPTIMIZER_BYTES: f64 = 12.0;

/// NCCL buffers per communicator: NCCL_BUFFSIZE (4 MiB) per channel and protocol, up to 32
/// channels on NVLink systems (NCCL environment-variable docs); ~200 MiB seen per
/// communicator on H100 in practice.
pub const NCCL_BYTES_PER_COMMUNICATOR: f64 = 200.0 * MIB;
/// CUDA context with PyTorch's kernels and cuBLAS workspaces loaded (~0.5-0.8 GiB on Hopper,
/// as `nvidia-smi` shows for an idle PyTorch process).
pub const CUDA_CONTEXT_BYTES: f64 = 640.0 * MIB;
/// Caching-allocator fragmentation on top of activations and transient buffers: the gap
/// between `memory_reserved` and `memory_allocated` that PyTorch reports in long runs.
pub const FRAGMENTATION: f64 = 0.10;

const MIB: f64 = 1024.0 * 1024.0;
