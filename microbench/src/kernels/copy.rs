//! Copies: GPU to GPU (peer access enabled, one way or both), pinned host to GPU and back,
//! and within one GPU's memory.

use super::summarize;
use super::timer::{cuda, time_iterations, Wait};
use crate::error::{Error, Result};
use crate::plan::CopyPath;
use cudarc::driver::sys::{cuCtxEnablePeerAccess, cudaError_enum};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use record::{Clock, Timing};
use std::sync::Arc;

/// Lets `from`'s context reach `to`'s memory directly (NVLink or PCIe P2P). Where the pair
/// has no P2P path, copies stage through host memory, which is what this pair really gets,
/// so that is measured rather than refused.
fn enable_peer_access(from: &Arc<CudaContext>, to: &Arc<CudaContext>, gpu: u32) -> Result<()> {
    from.bind_to_thread()
        .map_err(cuda("cuCtxSetCurrent", gpu))?;
    // SAFETY: both contexts are live; the call only changes the current context's mappings.
    let status = unsafe { cuCtxEnablePeerAccess(to.cu_ctx(), 0) };
    match status {
        cudaError_enum::CUDA_SUCCESS
        | cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        | cudaError_enum::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED => Ok(()),
        other => Err(Error::Cuda {
            call: "cuCtxEnablePeerAccess",
            gpu,
            message: format!("{other:?}"),
        }),
    }
}

/// Times one copy of `bytes` along `path`; `contexts` follow `path.gpus()`.
pub(super) fn measure(
    contexts: &[Arc<CudaContext>],
    path: CopyPath,
    bytes: u64,
    iters: u32,
    warmup: u32,
) -> Result<Timing> {
    let len = bytes as usize;
    let gpus = path.gpus();
    let stream = |i: usize| {
        contexts[i]
            .new_stream()
            .map_err(cuda("cuStreamCreate", gpus[i]))
    };
    let alloc =
        |s: &Arc<CudaStream>, gpu: u32| s.alloc_zeros::<u8>(len).map_err(cuda("cuMemAlloc", gpu));
    let mut samples = match path {
        CopyPath::P2p { bidirectional, .. } => {
            let (a, b) = (&contexts[0], &contexts[1]);
            enable_peer_access(a, b, gpus[0])?;
            enable_peer_access(b, a, gpus[1])?;
            let (sa, sb) = (stream(0)?, stream(1)?);
            let on_a = alloc(&sa, gpus[0])?;
            let mut on_b = alloc(&sb, gpus[1])?;
            // The reverse direction copies B's second buffer into A's.
            let back_src = alloc(&sb, gpus[1])?;
            let mut back_dst: CudaSlice<u8> = alloc(&sa, gpus[0])?;
            let streams = if bidirectional {
                vec![(gpus[1], sb.clone()), (gpus[0], sa.clone())]
            } else {
                vec![(gpus[1], sb.clone())]
            };
            time_iterations(&streams, iters, warmup, Wait::Block, || {
                sb.memcpy_dtod(&on_a, &mut on_b)
                    .map_err(cuda("cuMemcpyPeerAsync", gpus[1]))?;
                if bidirectional {
                    sa.memcpy_dtod(&back_src, &mut back_dst)
                        .map_err(cuda("cuMemcpyPeerAsync", gpus[0]))?;
                }
                Ok(())
            })?
        }
        CopyPath::H2d { gpu } | CopyPath::D2h { gpu } => {
            let s = stream(0)?;
            // SAFETY: the pinned buffer is only read or written by the copies below, which
            // complete before it is dropped (time_iterations synchronises the stream).
            let mut host = unsafe { contexts[0].alloc_pinned::<u8>(len) }
                .map_err(cuda("cuMemHostAlloc", gpu))?;
            let mut dev = alloc(&s, gpu)?;
            let to_device = matches!(path, CopyPath::H2d { .. });
            time_iterations(&[(gpu, s.clone())], iters, warmup, Wait::Block, || {
                if to_device {
                    s.memcpy_htod(&host, &mut dev)
                        .map_err(cuda("cuMemcpyHtoDAsync", gpu))
                } else {
                    s.memcpy_dtoh(&dev, &mut host)
                        .map_err(cuda("cuMemcpyDtoHAsync", gpu))
                }
            })?
        }
        CopyPath::Hbm { gpu } => {
            let s = stream(0)?;
            let src = alloc(&s, gpu)?;
            let mut dst = alloc(&s, gpu)?;
            time_iterations(&[(gpu, s.clone())], iters, warmup, Wait::Block, || {
                s.memcpy_dtod(&src, &mut dst)
                    .map_err(cuda("cuMemcpyDtoDAsync", gpu))
            })?
        }
    };
    Ok(summarize(&mut samples, Clock::CudaEvent))
}
