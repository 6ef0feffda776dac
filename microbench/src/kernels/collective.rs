//! NCCL collectives within a node, one process driving every GPU of the group (one rank per
//! GPU, `ncclCommInitAll`), timed like nccl-tests: warm-up, then the iterations back to back
//! on the streams with one pair of CUDA events around the loop, time = elapsed / iterations;
//! [`LOOPS`] such loops, of which the median is recorded; out-of-place, then in-place.
//!
//! A collective that fails, reports an asynchronous error (`ncclCommGetAsyncError`, polled
//! while the loop runs) or does not finish in time has its communicators aborted
//! (`ncclCommAbort`, which stops their kernels) before its buffers are freed; the next point
//! builds new ones. Every NCCL group opened is closed, even when an enqueue fails (issue 10).

use super::timer::{cuda, time_loops, Wait};
use super::{loop_timing, LOOPS};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut};
use cudarc::nccl::result as nccl;
use cudarc::nccl::sys::{self, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use record::{Clock, Dtype, Kind, Timing};
use std::ffi::{c_void, CStr};
use std::sync::Arc;

/// NCCL's name and description of a result, e.g. `ncclUnhandledCudaError: unhandled cuda error`.
fn describe(result: ncclResult_t) -> String {
    // SAFETY: ncclGetErrorString returns a pointer to a static, NUL-terminated string for every
    // result code; NCCL is loaded (every caller has made an NCCL call first).
    let text = unsafe { CStr::from_ptr(sys::ncclGetErrorString(result)) };
    format!("{result:?}: {}", text.to_string_lossy())
}

fn nccl_err(call: &'static str, gpu: u32) -> impl Fn(nccl::NcclError) -> Error {
    move |e| Error::Cuda {
        call,
        gpu,
        message: describe(e.0),
    }
}

/// The NCCL call that enqueues `kind` (all-to-all and send/recv are grouped sends and receives).
fn call_of(kind: Kind) -> &'static str {
    match kind {
        Kind::AllReduce => "ncclAllReduce",
        Kind::AllGather => "ncclAllGather",
        Kind::ReduceScatter => "ncclReduceScatter",
        _ => "ncclSend/ncclRecv",
    }
}

/// The loaded NCCL's version, `2.27.3`.
pub(super) fn nccl_version() -> Option<String> {
    let v = nccl::get_nccl_version().ok()?;
    Some(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
}

fn nccl_type(dtype: Dtype) -> ncclDataType_t {
    match dtype {
        Dtype::Int8 => ncclDataType_t::ncclInt8,
        Dtype::Uint8 => ncclDataType_t::ncclUint8,
        Dtype::Int32 => ncclDataType_t::ncclInt32,
        Dtype::Uint32 => ncclDataType_t::ncclUint32,
        Dtype::Int64 => ncclDataType_t::ncclInt64,
        Dtype::Uint64 => ncclDataType_t::ncclUint64,
        Dtype::Fp16 => ncclDataType_t::ncclFloat16,
        Dtype::Fp32 | Dtype::Tf32 => ncclDataType_t::ncclFloat32,
        Dtype::Fp64 => ncclDataType_t::ncclFloat64,
        Dtype::Bf16 => ncclDataType_t::ncclBfloat16,
        Dtype::Fp8E4m3 => ncclDataType_t::ncclFloat8e4m3,
        Dtype::Fp8E5m2 => ncclDataType_t::ncclFloat8e5m2,
    }
}

/// The NCCL communicators of one GPU group, one rank per GPU, kept across points (creating
/// them takes about a second) and destroyed when dropped.
pub(super) struct Communicators {
    gpus: Vec<u32>,
    contexts: Vec<Arc<CudaContext>>,
    comms: Vec<ncclComm_t>,
}

// SAFETY: NCCL communicators may be used from any thread as long as calls on one are not
// concurrent; the backend keeps them behind a mutex.
unsafe impl Send for Communicators {}

impl Drop for Communicators {
    fn drop(&mut self) {
        for &c in &self.comms {
            // SAFETY: each comm came from ncclCommInitAll and is destroyed once (an aborted
            // group has none left). A failure here cannot be acted on.
            let _ = unsafe { nccl::comm_destroy(c) };
        }
    }
}

impl Communicators {
    /// One communicator per GPU of `gpus`, whose CUDA contexts are `contexts`.
    pub(super) fn new(gpus: &[u32], contexts: Vec<Arc<CudaContext>>) -> Result<Communicators> {
        let n = contexts.len();
        let mut comms = vec![std::ptr::null_mut(); n];
        let ordinals: Vec<i32> = contexts.iter().map(|c| c.ordinal() as i32).collect();
        // SAFETY: `comms` has room for n communicators and `ordinals` names n CUDA devices.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), n as i32, ordinals.as_ptr()) }
            .map_err(nccl_err("ncclCommInitAll", gpus[0]))?;
        Ok(Communicators {
            gpus: gpus.to_vec(),
            contexts,
            comms,
        })
    }

    /// The GPUs, in rank order.
    pub(super) fn gpus(&self) -> &[u32] {
        &self.gpus
    }

    /// True once aborted: the group is unusable and is replaced at its next use.
    pub(super) fn aborted(&self) -> bool {
        self.comms.is_empty()
    }

    /// Aborts every communicator: NCCL stops their kernels and frees them, so a hung or broken
    /// collective releases the GPUs.
    fn abort(&mut self) {
        for (c, gpu) in std::mem::take(&mut self.comms).into_iter().zip(&self.gpus) {
            // SAFETY: each comm came from ncclCommInitAll and, taken out of `comms`, is aborted
            // once and never used again.
            if let Err(e) = unsafe { nccl::comm_abort(c) } {
                eprintln!("microbench: ncclCommAbort on GPU {gpu}: {}", describe(e.0));
            }
        }
    }

    /// The first asynchronous error any rank reports (a peer gone, a network or CUDA failure
    /// while kernels ran).
    fn async_error(&self) -> Result<()> {
        for (&comm, &gpu) in self.comms.iter().zip(&self.gpus) {
            let mut state = ncclResult_t::ncclSuccess;
            // SAFETY: `comm` is a live communicator of this group and `state` a valid place for
            // the result.
            unsafe { sys::ncclCommGetAsyncError(comm, &mut state) }
                .result()
                .map_err(nccl_err("ncclCommGetAsyncError", gpu))?;
            state.result().map_err(nccl_err(
                "NCCL asynchronous error (ncclCommGetAsyncError)",
                gpu,
            ))?;
        }
        Ok(())
    }
}

/// One rank's buffers: send and receive, as device addresses.
struct Rank {
    gpu: u32,
    stream: Arc<CudaStream>,
    send: u64,
    recv: u64,
}

/// Times `kind` over `group` at `bytes` per rank (nccl-tests' size), out-of-place and in-place.
/// On any failure the group is aborted before the buffers are freed (NCCL kernels may still be
/// using them).
pub(super) fn measure(
    group: &mut Communicators,
    kind: Kind,
    bytes: u64,
    dtype: Dtype,
    iters: u32,
    warmup: u32,
) -> Result<[Timing; 2]> {
    let n = group.contexts.len();
    let es = dtype.size_bytes();
    let elems = bytes / es;
    // Buffer sizes per rank in bytes, nccl-tests' convention: all-gather receives `bytes`
    // from sends of bytes/n, reduce-scatter the reverse.
    let share = bytes / n as u64;
    let (send_len, recv_len) = match kind {
        Kind::AllGather => (share, bytes),
        Kind::ReduceScatter => (bytes, share),
        _ => (bytes, bytes),
    };
    let mut buffers: Vec<(CudaSlice<u8>, CudaSlice<u8>)> = Vec::with_capacity(n);
    let mut streams = Vec::with_capacity(n);
    for (ctx, &gpu) in group.contexts.iter().zip(&group.gpus) {
        let stream = ctx.new_stream().map_err(cuda("cuStreamCreate", gpu))?;
        let alloc = |len: u64| {
            stream
                .alloc_zeros::<u8>(len.max(1) as usize)
                .map_err(cuda("cuMemAlloc", gpu))
        };
        buffers.push((alloc(send_len)?, alloc(recv_len)?));
        streams.push((gpu, stream));
    }
    let mut guards = Vec::with_capacity(n);
    let mut ranks = Vec::with_capacity(n);
    for ((send, recv), (gpu, stream)) in buffers.iter_mut().zip(&streams) {
        let (s, gs) = send.device_ptr_mut(stream);
        let (r, gr) = recv.device_ptr_mut(stream);
        guards.push((gs, gr));
        ranks.push(Rank {
            gpu: *gpu,
            stream: stream.clone(),
            send: s,
            recv: r,
        });
    }
    let ty = nccl_type(dtype);
    let shared: &Communicators = group;
    let check = || shared.async_error();
    let timed = |in_place: bool| -> Result<Timing> {
        let step = || issue(&shared.comms, &ranks, kind, elems, es, ty, in_place);
        let elapsed = time_loops(&streams, (LOOPS, iters), warmup, Wait::Watch(&check), step)?;
        Ok(loop_timing(&elapsed, iters, Clock::CudaEvent))
    };
    let timings = timed(false).and_then(|oop| Ok([oop, timed(true)?]));
    if timings.is_err() {
        group.abort();
    }
    // The buffers stay mapped (guards alive) until both timings are done or the group aborted.
    drop(guards);
    timings
}

/// Enqueues one collective on every rank inside one NCCL group, as a single thread driving
/// several GPUs must.
fn issue(
    comms: &[ncclComm_t],
    ranks: &[Rank],
    kind: Kind,
    elems: u64,
    es: u64,
    ty: ncclDataType_t,
    in_place: bool,
) -> Result<()> {
    let gpu = ranks.first().map_or(0, |r| r.gpu);
    nccl::group_start().map_err(nccl_err("ncclGroupStart", gpu))?;
    let enqueued = enqueue(comms, ranks, kind, elems, es, ty, in_place);
    // The group is closed even when an enqueue failed: an open group would swallow the calls
    // of the next point. The enqueue's error, the first, is the one reported.
    let closed = nccl::group_end().map_err(nccl_err("ncclGroupEnd", gpu));
    enqueued.and(closed.map(|_| ()))
}

/// Enqueues one rank's share of `kind` on every rank, inside an open group.
fn enqueue(
    comms: &[ncclComm_t],
    ranks: &[Rank],
    kind: Kind,
    elems: u64,
    es: u64,
    ty: ncclDataType_t,
    in_place: bool,
) -> Result<()> {
    let n = ranks.len() as u64;
    let per_rank = (elems / n) as usize;
    for (r, (rank, &comm)) in ranks.iter().zip(comms).enumerate() {
        let stream = rank.stream.cu_stream() as _;
        let err = nccl_err(call_of(kind), rank.gpu);
        let send = if in_place { rank.recv } else { rank.send };
        let chunk = per_rank as u64 * es;
        // SAFETY: the addresses are live device buffers of this rank's GPU, sized for the
        // counts passed (see `measure`), and `comm` is this rank's communicator.
        unsafe {
            match kind {
                Kind::AllReduce => nccl::all_reduce(
                    send as *const c_void,
                    rank.recv as *mut c_void,
                    elems as usize,
                    ty,
                    ncclRedOp_t::ncclSum,
                    comm,
                    stream,
                ),
                Kind::AllGather => {
                    let src = if in_place {
                        rank.recv + r as u64 * chunk
                    } else {
                        rank.send
                    };
                    nccl::all_gather(
                        src as *const c_void,
                        rank.recv as *mut c_void,
                        per_rank,
                        ty,
                        comm,
                        stream,
                    )
                }
                Kind::ReduceScatter => {
                    let dst = if in_place {
                        rank.send + r as u64 * chunk
                    } else {
                        rank.recv
                    };
                    nccl::reduce_scatter(
                        rank.send as *const c_void,
                        dst as *mut c_void,
                        per_rank,
                        ty,
                        ncclRedOp_t::ncclSum,
                        comm,
                        stream,
                    )
                }
                Kind::AllToAll => (0..n)
                    .try_for_each(|peer| {
                        nccl::send(
                            (send + peer * chunk) as *const c_void,
                            per_rank,
                            ty,
                            peer as i32,
                            comm,
                            stream,
                        )?;
                        nccl::recv(
                            (rank.recv + peer * chunk) as *mut c_void,
                            per_rank,
                            ty,
                            peer as i32,
                            comm,
                            stream,
                        )
                        .map(|_| ())
                    })
                    .map(|()| nccl::NcclStatus::Success),
                Kind::SendRecv => {
                    let next = ((r as u64 + 1) % n) as i32;
                    let prev = ((r as u64 + n - 1) % n) as i32;
                    nccl::send(
                        send as *const c_void,
                        elems as usize,
                        ty,
                        next,
                        comm,
                        stream,
                    )
                    .and_then(|_| {
                        nccl::recv(
                            rank.recv as *mut c_void,
                            elems as usize,
                            ty,
                            prev,
                            comm,
                            stream,
                        )
                    })
                }
                other => {
                    return Err(Error::BadValue {
                        field: "collective",
                        value: other.to_string(),
                        expected: "all_reduce, all_gather, reduce_scatter, all_to_all or send_recv"
                            .into(),
                    })
                }
            }
        }
        .map_err(err)?;
    }
    Ok(())
}
