//! Copies: GPU to GPU (peer access enabled, one way or both), pinned host to GPU and back,
//! and within one GPU's memory.

use super::summarize;
use super::timer::{cuda, time_iterations, Wait};
use crate::error::{Error, Result};
use crate::plan::CopyPath;
use cudarc::driver::sys::{
    cuCtxEnablePeerAccess, cuMemcpyPeerAsync, cudaError_enum, CUcontext, CUdeviceptr,
};
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
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

/// One end of a peer copy: a device address in a GPU's context.
#[derive(Debug, Clone, Copy)]
struct End {
    ctx: CUcontext,
    at: CUdeviceptr,
    gpu: u32,
}

/// One direction of a peer copy, enqueued on the stream of its receiving GPU.
#[derive(Debug, Clone, Copy)]
struct Direction {
    from: End,
    to: End,
}

/// Where peer copies are enqueued: on real GPUs, `cuMemcpyPeerAsync` on a stream.
trait PeerQueue {
    /// Enqueues `direction` on stream `stream`, without waiting on any other stream.
    fn copy(&self, stream: usize, direction: &Direction, bytes: u64) -> Result<()>;
}

/// The streams of a peer copy, one per direction in the order of its directions.
struct Queue<'a> {
    streams: &'a [(u32, Arc<CudaStream>)],
}

impl PeerQueue for Queue<'_> {
    fn copy(&self, stream: usize, d: &Direction, bytes: u64) -> Result<()> {
        let (_, s) = &self.streams[stream];
        // SAFETY: both addresses are live allocations of `bytes` bytes in their contexts,
        // peer access is enabled both ways, and the stream belongs to the receiving GPU.
        unsafe {
            cuMemcpyPeerAsync(
                d.to.at,
                d.to.ctx,
                d.from.at,
                d.from.ctx,
                bytes as usize,
                s.cu_stream(),
            )
        }
        .result()
        .map_err(cuda("cuMemcpyPeerAsync", d.to.gpu))
    }
}

/// One iteration of a peer copy: each direction on its own stream, all enqueued before any
/// completes, so both directions run at once.
fn peer_copies(queue: &dyn PeerQueue, directions: &[Direction], bytes: u64) -> Result<()> {
    directions
        .iter()
        .enumerate()
        .try_for_each(|(stream, d)| queue.copy(stream, d, bytes))
}

/// Times one copy of `bytes` along `path`; `contexts` follow `path.gpus()`. `sample` runs
/// while the timed copies run (see [`Wait`]).
pub(super) fn measure(
    contexts: &[Arc<CudaContext>],
    path: CopyPath,
    bytes: u64,
    (iters, warmup): (u32, u32),
    sample: &dyn Fn(),
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
            // Each buffer is allocated on, and its address taken for, its own GPU's stream,
            // once: the copies below then name raw addresses, so no copy waits on an event of
            // the other GPU's stream (cudarc's memcpy_dtod would make each direction wait on
            // the other's, and p2p-bidir would read as one way).
            let (on_a, mut on_b) = (alloc(&sa, gpus[0])?, alloc(&sb, gpus[1])?);
            let (back_src, mut back_dst) = (alloc(&sb, gpus[1])?, alloc(&sa, gpus[0])?);
            let (pa, _ga) = on_a.device_ptr(&sa);
            let (pb, _gb) = on_b.device_ptr_mut(&sb);
            let (pbs, _gbs) = back_src.device_ptr(&sb);
            let (pad, _gad) = back_dst.device_ptr_mut(&sa);
            let ends = |ctx: &Arc<CudaContext>, at, gpu| End {
                ctx: ctx.cu_ctx(),
                at,
                gpu,
            };
            let forward = Direction {
                from: ends(a, pa, gpus[0]),
                to: ends(b, pb, gpus[1]),
            };
            let reverse = Direction {
                from: ends(b, pbs, gpus[1]),
                to: ends(a, pad, gpus[0]),
            };
            let streams = if bidirectional {
                vec![(gpus[1], sb.clone()), (gpus[0], sa.clone())]
            } else {
                vec![(gpus[1], sb.clone())]
            };
            let queue = Queue { streams: &streams };
            let directions: Vec<Direction> = if bidirectional {
                vec![forward, reverse]
            } else {
                vec![forward]
            };
            time_iterations(&streams, iters, warmup, Wait::Block(sample), || {
                peer_copies(&queue, &directions, bytes)
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
            time_iterations(
                &[(gpu, s.clone())],
                iters,
                warmup,
                Wait::Block(sample),
                || {
                    if to_device {
                        s.memcpy_htod(&host, &mut dev)
                            .map_err(cuda("cuMemcpyHtoDAsync", gpu))
                    } else {
                        s.memcpy_dtoh(&dev, &mut host)
                            .map_err(cuda("cuMemcpyDtoHAsync", gpu))
                    }
                },
            )?
        }
        CopyPath::Hbm { gpu } => {
            let s = stream(0)?;
            let src = alloc(&s, gpu)?;
            let mut dst = alloc(&s, gpu)?;
            time_iterations(
                &[(gpu, s.clone())],
                iters,
                warmup,
                Wait::Block(sample),
                || {
                    s.memcpy_dtod(&src, &mut dst)
                        .map_err(cuda("cuMemcpyDtoDAsync", gpu))
                },
            )?
        }
    };
    Ok(summarize(&mut samples, Clock::CudaEvent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Streams as the driver runs them: work on a stream runs in its order, one copy takes
    /// one unit of time, and a stream told to wait for an event recorded on another
    /// (`cuEventRecord`, then `cuStreamWaitEvent`) runs nothing more until that other
    /// stream's work up to the event is done. Records each copy with its stream, the GPU it
    /// reads and its start.
    #[derive(Default)]
    struct Streams {
        /// When each stream's queued work ends.
        ends: RefCell<Vec<u32>>,
        copies: RefCell<Vec<Copied>>,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Copied {
        stream: usize,
        from: u32,
        start: u32,
    }

    impl Streams {
        fn end(&self, stream: usize) -> u32 {
            let mut ends = self.ends.borrow_mut();
            if ends.len() <= stream {
                ends.resize(stream + 1, 0);
            }
            ends[stream]
        }

        /// `stream` waits for an event recorded on `on` now.
        fn wait(&self, stream: usize, on: usize) {
            let at = self.end(on).max(self.end(stream));
            self.ends.borrow_mut()[stream] = at;
        }
    }

    impl PeerQueue for Streams {
        fn copy(&self, stream: usize, d: &Direction, _bytes: u64) -> Result<()> {
            let start = self.end(stream);
            self.ends.borrow_mut()[stream] = start + 1;
            self.copies.borrow_mut().push(Copied {
                stream,
                from: d.from.gpu,
                start,
            });
            Ok(())
        }
    }

    fn end(gpu: u32) -> End {
        End {
            ctx: std::ptr::null_mut(),
            at: 0,
            gpu,
        }
    }

    /// 0 -> 1 and 1 -> 0.
    fn both() -> [Direction; 2] {
        [
            Direction {
                from: end(0),
                to: end(1),
            },
            Direction {
                from: end(1),
                to: end(0),
            },
        ]
    }

    /// Where the copies of `iterations` iterations started, by direction: each direction
    /// on its own stream, and both starting together in every iteration, or not.
    fn starts(streams: &Streams, iterations: u32) -> Vec<(usize, u32, u32)> {
        let copies = streams.copies.borrow();
        assert_eq!(copies.len(), 2 * iterations as usize);
        copies.iter().map(|c| (c.stream, c.from, c.start)).collect()
    }

    /// p2p-bidir between GPUs 0 and 1, three iterations: 0 -> 1 and 1 -> 0 each run on
    /// their own stream and start together in every iteration, so both directions' bytes
    /// move at once (issue 29, item 1). Each direction waited on the other's stream before
    /// (cudarc's `memcpy_dtod` across contexts: see the next test), and each iteration's
    /// reverse copy started when its forward one ended.
    #[test]
    fn both_directions_go_on_their_own_streams() {
        let streams = Streams::default();
        for _ in 0..3 {
            peer_copies(&streams, &both(), 1 << 20).unwrap();
        }
        assert_eq!(
            starts(&streams, 3),
            [
                (0, 0, 0),
                (1, 1, 0),
                (0, 0, 1),
                (1, 1, 1),
                (0, 0, 2),
                (1, 1, 2)
            ]
        );
    }

    /// What the copies were before the fix, on the same streams: cudarc 0.19's
    /// `memcpy_dtod` with a source in another context records an event on the source's
    /// stream and makes the copy's stream wait for it, and the source of each direction
    /// lived on the other direction's stream (0 -> 1 reads GPU 0's buffer of stream 1, and
    /// the reverse GPU 1's of stream 0). The check above reads that as serialized: each
    /// reverse copy starts when its forward one ends, three iterations take six copies' time.
    #[test]
    fn the_old_memcpy_dtod_waits_serialize_the_directions() {
        let streams = Streams::default();
        let sources_stream = [1, 0];
        for _ in 0..3 {
            for (stream, d) in both().iter().enumerate() {
                streams.wait(stream, sources_stream[stream]);
                streams.copy(stream, d, 1 << 20).unwrap();
            }
        }
        assert_eq!(
            starts(&streams, 3),
            [
                (0, 0, 0),
                (1, 1, 1),
                (0, 0, 2),
                (1, 1, 3),
                (0, 0, 4),
                (1, 1, 5)
            ]
        );
    }
}
