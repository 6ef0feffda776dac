//! NCCL collectives, timed like nccl-tests: warm-up, then the iterations back to back on the
//! streams with one pair of CUDA events around the loop, time = elapsed / iterations;
//! [`LOOPS`] such loops, of which the median is recorded; out-of-place, then in-place.
//!
//! A [`Communicators`] holds this process's ranks of one communicator, each with its rank
//! index and the communicator's size: within a node one process drives every GPU of the group
//! (ranks 0 to n-1, as `ncclCommInitAll` makes them); in a multi-process job (issue 12) each process holds
//! one rank of the job's communicator (`ncclCommInitRankConfig`) or of a split of it
//! (`ncclCommSplit`), both non-blocking and waited for under a deadline (see
//! [`super::nonblocking`]), as is every group of collectives on them. Offsets and peers follow the rank index and size, never the position of
//! a rank in this process.
//!
//! A collective that fails, reports an asynchronous error (`ncclCommGetAsyncError`, polled
//! while the loop runs) or does not finish in time has its communicators aborted
//! (`ncclCommAbort`, which stops their kernels) before its buffers are freed; the next point
//! builds new ones. Every NCCL group opened is closed, even when an enqueue fails (issue 10).

use super::loader::dotted;
use super::nccl::{checked, describe, nccl, version_number, Api};
use super::nonblocking;
use super::timer::{cuda, time_loops, Wait, HUNG_AFTER};
use super::{loop_timing, LOOPS};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaSlice, DevicePtrMut};
use cudarc::nccl::sys::{
    self, cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t,
};
use record::{Clock, Dtype, Kind, Timing};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

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

/// The first NCCL with fp8 types (`ncclFloat8e4m3`, `ncclFloat8e5m2`): 2.24.
const FP8_SINCE: u64 = 22400;

/// Refuses an element type the loaded NCCL (`version`, as `ncclGetVersion` gives it) lacks:
/// an older NCCL reads fp8's type numbers as no type and fails the call with an invalid
/// argument, or past its table.
fn check_dtype(dtype: Dtype, version: Option<u64>, gpu: u32) -> Result<()> {
    let fp8 = matches!(dtype, Dtype::Fp8E4m3 | Dtype::Fp8E5m2);
    match version {
        Some(v) if fp8 && v < FP8_SINCE => Err(Error::Unsupported {
            what: format!("{dtype} collectives"),
            gpu,
            reason: format!(
                "NCCL {} added fp8; the loaded NCCL is {}",
                dotted(FP8_SINCE),
                dotted(v)
            ),
        }),
        None if fp8 => Err(Error::Unsupported {
            what: format!("{dtype} collectives"),
            gpu,
            reason: "the loaded NCCL does not say its version (ncclGetVersion failed), and \
                     fp8 needs 2.24 or later"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// This process's ranks of one NCCL communicator, kept across points (creating them takes
/// about a second); when dropped, finalized and destroyed, or aborted when they do not
/// finalize in time (see [`nonblocking::close`]).
pub(crate) struct Communicators {
    api: &'static Api,
    gpus: Vec<u32>,
    contexts: Vec<Arc<CudaContext>>,
    comms: Vec<ncclComm_t>,
    /// The rank index of each of `comms` in the communicator.
    ranks: Vec<u32>,
    /// Ranks in the communicator, across every process.
    world: u32,
    /// How long a call that waits for the other ranks may take before the communicators
    /// are aborted, their finalize when dropped included.
    timeout: Duration,
}

// SAFETY: NCCL communicators may be used from any thread as long as calls on one are not
// concurrent; the backend keeps them behind a mutex, a job rank in one thread.
unsafe impl Send for Communicators {}

impl Drop for Communicators {
    fn drop(&mut self) {
        // An aborted group has none left. Each comm came from NCCL's init or split and, taken
        // out of `comms`, is closed once.
        let comms: Vec<(ncclComm_t, u32)> = std::mem::take(&mut self.comms)
            .into_iter()
            .zip(self.gpus.iter().copied())
            .collect();
        if comms.is_empty() {
            return;
        }
        // A failure here cannot be acted on beyond the abort `close` already did.
        if let Err(e) = nonblocking::close(self.api, &comms, self.timeout) {
            eprintln!("microbench: closing NCCL communicators: {e}");
        }
    }
}

impl Communicators {
    /// One communicator per GPU of `gpus`, whose CUDA contexts are `contexts`, all driven by
    /// this process: ranks 0 to n-1 in the order of `gpus`.
    pub(super) fn new(gpus: &[u32], contexts: Vec<Arc<CudaContext>>) -> Result<Communicators> {
        let api = nccl()?;
        let n = contexts.len();
        let ranks: Vec<(Arc<CudaContext>, u32)> =
            contexts.iter().cloned().zip(gpus.iter().copied()).collect();
        let comms = nonblocking::init_all(api, &ranks, HUNG_AFTER)?;
        Ok(Communicators {
            api,
            gpus: gpus.to_vec(),
            contexts,
            comms,
            ranks: (0..n as u32).collect(),
            world: n as u32,
            timeout: HUNG_AFTER,
        })
    }

    /// Rank `rank` of a communicator of `world` ranks across processes (`ncclCommInitRankConfig`
    /// with rank 0's unique id `id`), on `gpu` whose context is `ctx`; waits at most
    /// `timeout` for the other ranks.
    pub(crate) fn join(
        gpu: u32,
        ctx: Arc<CudaContext>,
        (rank, world): (u32, u32),
        id: &[u8],
        timeout: Duration,
    ) -> Result<Communicators> {
        let bad_id = || Error::BadValue {
            field: "NCCL unique id",
            value: format!("{} bytes", id.len()),
            expected: "the 128 bytes of rank 0's ncclGetUniqueId".into(),
        };
        let bytes: [u8; 128] = id.try_into().map_err(|_| bad_id())?;
        let api = nccl()?;
        let unique = sys::ncclUniqueId {
            internal: bytes.map(|b| b as c_char),
        };
        // NCCL takes the calling thread's current context as its device.
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent", gpu))?;
        let comm = nonblocking::init_rank(api, gpu, (rank, world), unique, timeout)?;
        Ok(Communicators {
            api,
            gpus: vec![gpu],
            contexts: vec![ctx],
            comms: vec![comm],
            ranks: vec![rank],
            world,
            timeout,
        })
    }

    /// This process's rank of a sub-communicator (`ncclCommSplit` of its one rank here, with
    /// `color` and `key`; every rank of this communicator must call it). `None` for
    /// `NCCL_SPLIT_NOCOLOR`, which takes no part.
    pub(crate) fn split(
        &self,
        color: i32,
        key: u32,
        timeout: Duration,
    ) -> Result<Option<Communicators>> {
        let (&parent, &gpu, ctx) = match (&self.comms[..], &self.gpus[..], &self.contexts[..]) {
            ([c], [g], [x]) => (c, g, x),
            _ => {
                return Err(Error::BadValue {
                    field: "communicators to split",
                    value: self.comms.len().to_string(),
                    expected: "one rank in this process".into(),
                })
            }
        };
        let api = self.api;
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent", gpu))?;
        let comm = nonblocking::split(api, parent, gpu, (color, key as c_int), timeout)?;
        if comm.is_null() {
            return Ok(None);
        }
        // Held from here, so that an error below still destroys it (Drop).
        let mut made = Communicators {
            api,
            gpus: vec![gpu],
            contexts: vec![ctx.clone()],
            comms: vec![comm],
            ranks: vec![0],
            world: 0,
            timeout,
        };
        let (mut rank, mut world): (c_int, c_int) = (0, 0);
        // SAFETY: `comm` is the live communicator just made; both out pointers are valid.
        let (r, w) = unsafe {
            (
                (api.ncclCommUserRank)(comm, &mut rank),
                (api.ncclCommCount)(comm, &mut world),
            )
        };
        checked(api, "ncclCommUserRank", gpu, r)?;
        checked(api, "ncclCommCount", gpu, w)?;
        made.ranks = vec![rank as u32];
        made.world = world as u32;
        Ok(Some(made))
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
    pub(crate) fn abort(&mut self) {
        for (c, gpu) in std::mem::take(&mut self.comms).into_iter().zip(&self.gpus) {
            // SAFETY: each comm came from NCCL's init or split and, taken out of `comms`, is
            // aborted once and never used again.
            let status = unsafe { (self.api.ncclCommAbort)(c) };
            if let Err(e) = status.result() {
                eprintln!(
                    "microbench: ncclCommAbort on GPU {gpu}: {}",
                    describe(self.api, e.0)
                );
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
            let status = unsafe { (self.api.ncclCommGetAsyncError)(comm, &mut state) };
            checked(self.api, "ncclCommGetAsyncError", gpu, status)?;
            checked(
                self.api,
                "NCCL asynchronous error (ncclCommGetAsyncError)",
                gpu,
                state,
            )?;
        }
        Ok(())
    }
}

/// One rank's buffers: send and receive, as device addresses, its stream, as NCCL takes it
/// (its owner keeps it alive), and its rank index in the communicator.
struct Rank {
    gpu: u32,
    index: u32,
    stream: cudaStream_t,
    send: u64,
    recv: u64,
}

/// Times `kind` over `group` at `bytes` per rank (nccl-tests' size), out-of-place and in-place.
/// On any failure the group is aborted before the buffers are freed (NCCL kernels may still be
/// using them).
pub(super) fn measure(
    group: &mut Communicators,
    (kind, bytes, dtype): (Kind, u64, Dtype),
    (iters, warmup): (u32, u32),
    sample: &dyn Fn(),
) -> Result<[Timing; 2]> {
    let [oop, ip] = measure_loops(group, (kind, None), bytes, dtype, (iters, warmup), sample)?;
    let timing = |elapsed: &[f64]| loop_timing(elapsed, iters, Clock::CudaEvent);
    Ok([timing(&oop), timing(&ip)])
}

/// What a point runs on a communicator: `kind` over all its ranks, or with `Some(peer)`, a
/// send/recv exchange between this process's one rank and `peer` only (the pairwise pass of
/// a job, issue 12).
pub(crate) type Traffic = (Kind, Option<u32>);

/// The elapsed time of each of [`LOOPS`] loops of `iters` iterations, out-of-place then
/// in-place, as this process's GPUs saw them (the longest of its streams): what a job rank
/// sends rank 0, which averages them across ranks. `sample` runs while each set of loops
/// runs (see [`Wait`]). Aborts the group on any failure.
pub(crate) fn measure_loops(
    group: &mut Communicators,
    traffic: Traffic,
    bytes: u64,
    dtype: Dtype,
    (iters, warmup): (u32, u32),
    sample: &dyn Fn(),
) -> Result<[Vec<f64>; 2]> {
    let kind = traffic.0;
    check_dtype(dtype, version_number(group.api), group.gpus[0])?;
    let n = group.world;
    let es = dtype.size_bytes();
    let elems = bytes / es;
    // Buffer sizes per rank in bytes, nccl-tests' convention: all-gather receives `bytes`
    // from sends of bytes/n, reduce-scatter the reverse.
    let share = bytes / u64::from(n);
    let (send_len, recv_len) = match kind {
        Kind::AllGather => (share, bytes),
        Kind::ReduceScatter => (bytes, share),
        _ => (bytes, bytes),
    };
    let mut buffers: Vec<(CudaSlice<u8>, CudaSlice<u8>)> = Vec::with_capacity(group.gpus.len());
    let mut streams = Vec::with_capacity(group.gpus.len());
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
    let mut guards = Vec::with_capacity(buffers.len());
    let mut ranks = Vec::with_capacity(buffers.len());
    for (((send, recv), (gpu, stream)), &index) in
        buffers.iter_mut().zip(&streams).zip(&group.ranks)
    {
        let (s, gs) = send.device_ptr_mut(stream);
        let (r, gr) = recv.device_ptr_mut(stream);
        guards.push((gs, gr));
        ranks.push(Rank {
            gpu: *gpu,
            index,
            stream: stream.cu_stream() as cudaStream_t,
            send: s,
            recv: r,
        });
    }
    let point = Point {
        traffic,
        world: n,
        elems,
        es,
        ty: nccl_type(dtype),
    };
    let shared: &Communicators = group;
    let members: Vec<(ncclComm_t, u32)> = shared
        .comms
        .iter()
        .copied()
        .zip(shared.gpus.iter().copied())
        .collect();
    let check = || shared.async_error();
    let timed = |in_place: bool| -> Result<Vec<f64>> {
        let step = || {
            issue(
                shared.api,
                (&shared.comms, &members),
                &ranks,
                (&point, in_place),
                shared.timeout,
            )
        };
        time_loops(
            &streams,
            (LOOPS, iters),
            warmup,
            Wait::Watch(sample, &check),
            step,
        )
    };
    let loops = timed(false).and_then(|oop| Ok([oop, timed(true)?]));
    if loops.is_err() {
        group.abort();
    }
    // The buffers stay mapped (guards alive) until both loops are done or the group aborted.
    drop(guards);
    loops
}

/// What every rank enqueues for one iteration.
struct Point {
    traffic: Traffic,
    world: u32,
    elems: u64,
    es: u64,
    ty: ncclDataType_t,
}

/// Enqueues one collective on every rank of this process inside one NCCL group, as a single
/// thread driving several GPUs must (and harmless for one), and waits, at most `timeout`, for
/// the group to be enqueued: the communicators are non-blocking, so `ncclGroupEnd` may
/// return `ncclInProgress` while it connects to the peers (see [`nonblocking::group`]).
/// `members` are `comms` with their GPUs; on an error the caller aborts them.
fn issue(
    api: &'static Api,
    (comms, members): (&[ncclComm_t], &[(ncclComm_t, u32)]),
    ranks: &[Rank],
    (point, in_place): (&Point, bool),
    timeout: Duration,
) -> Result<()> {
    nonblocking::group(api, members, timeout, |open| {
        ranks
            .iter()
            .zip(comms)
            .try_for_each(|(rank, &comm)| enqueue(api, open, comm, rank, (point, in_place)))
    })
}

/// Byte offset of rank `rank`'s share in a buffer of one `chunk`-byte share per rank: where
/// NCCL's in-place all-gather reads its input (recvbuff + rank x chunk) and in-place
/// reduce-scatter writes its output (sendbuff + rank x chunk).
pub(crate) fn share_offset(rank: u32, chunk: u64) -> u64 {
    u64::from(rank) * chunk
}

/// One grouped send and receive: to `to`, from `from`, each at share `slot` of its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub to: u32,
    pub from: u32,
    pub slot: u32,
}

/// The sends and receives of rank `rank` of `world` for all-to-all (share p to and from every
/// rank p, itself included, as nccl-tests' alltoall) and send/recv: to the next rank of the
/// ring and from the previous one (nccl-tests' sendrecv), or to and from `peer` alone.
pub(crate) fn exchanges(kind: Kind, rank: u32, world: u32, peer: Option<u32>) -> Vec<Exchange> {
    match (kind, peer) {
        (Kind::AllToAll, _) => (0..world)
            .map(|p| Exchange {
                to: p,
                from: p,
                slot: p,
            })
            .collect(),
        (_, Some(p)) => vec![Exchange {
            to: p,
            from: p,
            slot: 0,
        }],
        _ => vec![Exchange {
            to: (rank + 1) % world,
            from: (rank + world - 1) % world,
            slot: 0,
        }],
    }
}

/// Enqueues one rank's share of the point, inside the `open` group; each call's answer is
/// checked as it comes ([`nonblocking::Open::taken`]).
fn enqueue(
    api: &'static Api,
    open: &nonblocking::Open,
    comm: ncclComm_t,
    rank: &Rank,
    (point, in_place): (&Point, bool),
) -> Result<()> {
    let (kind, peer) = point.traffic;
    let Point {
        world,
        elems,
        es,
        ty,
        ..
    } = *point;
    let per_rank = (elems / u64::from(world)) as usize;
    let stream = rank.stream;
    let taken = |call, status| open.taken(comm, call, rank.gpu, status);

    let send = if in_place { rank.recv } else { rank.send };
    let chunk = per_rank as u64 * es;
    // SAFETY (every call below): the addresses are live device buffers of this rank's GPU,
    // sized for the counts passed (see `measure_loops`), and `comm` is this rank's
    // communicator.
    let exchange = |count: usize, bytes: u64| -> Result<()> {
        for x in exchanges(kind, rank.index, world, peer) {
            let at = share_offset(x.slot, bytes);
            let sent = unsafe {
                (api.ncclSend)(
                    (send + at) as *const c_void,
                    count,
                    ty,
                    x.to as c_int,
                    comm,
                    stream,
                )
            };
            taken("ncclSend", sent)?;
            let received = unsafe {
                (api.ncclRecv)(
                    (rank.recv + at) as *mut c_void,
                    count,
                    ty,
                    x.from as c_int,
                    comm,
                    stream,
                )
            };
            taken("ncclRecv", received)?;
        }
        Ok(())
    };
    match kind {
        Kind::AllReduce => taken("ncclAllReduce", unsafe {
            (api.ncclAllReduce)(
                send as *const c_void,
                rank.recv as *mut c_void,
                elems as usize,
                ty,
                ncclRedOp_t::ncclSum,
                comm,
                stream,
            )
        }),
        Kind::AllGather => {
            let src = if in_place {
                rank.recv + share_offset(rank.index, chunk)
            } else {
                rank.send
            };
            taken("ncclAllGather", unsafe {
                (api.ncclAllGather)(
                    src as *const c_void,
                    rank.recv as *mut c_void,
                    per_rank,
                    ty,
                    comm,
                    stream,
                )
            })
        }
        Kind::ReduceScatter => {
            let dst = if in_place {
                rank.send + share_offset(rank.index, chunk)
            } else {
                rank.recv
            };
            taken("ncclReduceScatter", unsafe {
                (api.ncclReduceScatter)(
                    rank.send as *const c_void,
                    dst as *mut c_void,
                    per_rank,
                    ty,
                    ncclRedOp_t::ncclSum,
                    comm,
                    stream,
                )
            })
        }
        Kind::AllToAll => exchange(per_rank, chunk),
        Kind::SendRecv => exchange(elems as usize, 0),
        other => Err(Error::BadValue {
            field: "collective",
            value: other.to_string(),
            expected: "all_reduce, all_gather, reduce_scatter, all_to_all or send_recv".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fp8 collectives need NCCL 2.24: refused on 2.23.4 and on an NCCL that gives no
    /// version, run on 2.24.3; bf16 runs on either.
    #[test]
    fn fp8_collectives_need_nccl_2_24() {
        let err = check_dtype(Dtype::Fp8E4m3, Some(22304), 1)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "fp8_e4m3 collectives is not supported on GPU 1 (NCCL 2.24.0 added fp8; the loaded \
             NCCL is 2.23.4)"
        );
        assert!(check_dtype(Dtype::Fp8E5m2, None, 0).is_err());
        assert!(check_dtype(Dtype::Fp8E5m2, Some(22403), 0).is_ok());
        assert!(check_dtype(Dtype::Bf16, Some(21805), 0).is_ok());
    }

    /// Two ranks of one process on the fake NCCL, communicators 1 and 2, closed within
    /// `timeout`.
    fn fake_group(timeout: Duration) -> Communicators {
        use super::super::nccl::fake;
        Communicators {
            api: &fake::API,
            gpus: vec![0, 1],
            contexts: Vec::new(),
            comms: vec![fake::comm(1), fake::comm(2)],
            ranks: vec![0, 1],
            world: 2,
            timeout,
        }
    }

    /// A group that did its work is finalized, every rank before any is waited for, and
    /// destroyed once finalized (issue 29, item 3): destroying a live communicator skips
    /// the flush of its peers' pending work.
    #[test]
    fn a_dropped_group_is_finalized_then_destroyed() {
        use super::super::nccl::fake;
        fake::set_state(ncclResult_t::ncclSuccess);
        drop(fake_group(Duration::from_secs(5)));
        assert_eq!(
            fake::calls(),
            [
                ("ncclCommFinalize", 1),
                ("ncclCommFinalize", 2),
                ("ncclCommDestroy", 1),
                ("ncclCommDestroy", 2)
            ]
        );
        // An aborted group has nothing left to close.
        let mut aborted = fake_group(Duration::from_secs(5));
        aborted.abort();
        drop(aborted);
        assert_eq!(fake::calls(), [("ncclCommAbort", 1), ("ncclCommAbort", 2)]);
    }

    /// A finalize still pending at the deadline (a peer gone) or failing is not followed by
    /// a destroy, which would wait on it: the group is aborted.
    #[test]
    fn a_group_that_does_not_finalize_in_time_is_aborted() {
        use super::super::nccl::fake;
        let aborted = [
            ("ncclCommFinalize", 1),
            ("ncclCommFinalize", 2),
            ("ncclCommAbort", 1),
            ("ncclCommAbort", 2),
        ];
        fake::set_state(ncclResult_t::ncclInProgress);
        let start = std::time::Instant::now();
        drop(fake_group(Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert_eq!(fake::calls(), aborted);
        fake::set_state(ncclResult_t::ncclRemoteError);
        let err = nonblocking::close(
            &fake::API,
            &[(fake::comm(1), 0), (fake::comm(2), 1)],
            Duration::from_secs(60),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ncclCommFinalize"), "{err}");
        assert!(err.contains("ncclRemoteError"), "{err}");
        assert_eq!(fake::calls(), aborted);
    }

    /// An all-reduce and an all-to-all whose enqueue calls answer `ncclInProgress`, which
    /// NCCL's guide lets any call on a non-blocking communicator answer, have the
    /// communicator polled until done before the next call, and the group goes on (issue 29:
    /// they were refused as errors); one still in progress at the group's deadline fails it
    /// naming the call, before any other call is made; an error is named as before.
    #[test]
    fn an_enqueue_in_progress_is_waited_for_under_the_group_s_deadline() {
        use super::super::nccl::fake;
        let comms = [fake::comm(1), fake::comm(2)];
        let members = [(comms[0], 0), (comms[1], 1)];
        let ranks: Vec<Rank> = (0..2)
            .map(|i| Rank {
                gpu: i,
                index: i,
                stream: std::ptr::null_mut(),
                send: 0,
                recv: 0,
            })
            .collect();
        let point = |kind| Point {
            traffic: (kind, None),
            world: 2,
            elems: 1024,
            es: 2,
            ty: ncclDataType_t::ncclBfloat16,
        };
        let run = |kind, timeout| {
            issue(
                &fake::API,
                (&comms, &members),
                &ranks,
                (&point(kind), false),
                timeout,
            )
        };
        let (start, end) = (("ncclGroupStart", 0), ("ncclGroupEnd", 0));

        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_enqueue(ncclResult_t::ncclInProgress);
        fake::set_pending(3);
        run(Kind::AllReduce, Duration::from_secs(5)).unwrap();
        let reduced = [start, ("ncclAllReduce", 1), ("ncclAllReduce", 2), end];
        assert_eq!(fake::calls(), reduced);
        run(Kind::AllToAll, Duration::from_secs(5)).unwrap();
        let mut exchanged = vec![start];
        for comm in [1, 2] {
            for _ in 0..2 {
                exchanged.extend([("ncclSend", comm), ("ncclRecv", comm)]);
            }
        }
        exchanged.push(end);
        assert_eq!(fake::calls(), exchanged);

        fake::set_state_of(1, ncclResult_t::ncclInProgress);
        let timeout = Duration::from_millis(300);
        let began = std::time::Instant::now();
        let err = run(Kind::AllReduce, timeout).unwrap_err();
        assert!(began.elapsed() >= timeout);
        assert!(
            matches!(&err, Error::Cuda { call: "ncclAllReduce", gpu: 0, message }
                if message.starts_with("not done after 0.3 s")),
            "{err}"
        );
        assert_eq!(fake::calls(), [start, ("ncclAllReduce", 1), end]);

        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_enqueue(ncclResult_t::ncclInvalidArgument);
        let err = run(Kind::AllReduce, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&err, Error::Cuda { call: "ncclAllReduce", gpu: 0, message }
                if message.contains("ncclInvalidArgument")),
            "{err}"
        );
        assert_eq!(fake::calls(), [start, ("ncclAllReduce", 1), end]);
    }

    fn x(to: u32, from: u32, slot: u32) -> Exchange {
        Exchange { to, from, slot }
    }

    /// In-place all-gather of 8 ranks with 1 MiB shares: rank 5's input sits at 5 MiB.
    #[test]
    fn in_place_shares_sit_at_the_global_rank() {
        assert_eq!(share_offset(5, 1 << 20), 5 << 20);
        assert_eq!(share_offset(0, 1 << 20), 0);
    }

    /// Rank 2 of a 4-rank all-to-all sends share p to and receives share p from every p;
    /// the global rank, not the position in this process, picks them.
    #[test]
    fn all_to_all_goes_to_every_rank_of_the_world() {
        assert_eq!(
            exchanges(Kind::AllToAll, 2, 4, None),
            vec![x(0, 0, 0), x(1, 1, 1), x(2, 2, 2), x(3, 3, 3)]
        );
    }

    /// The send/recv ring of nccl-tests: rank r sends to r+1 and receives from r-1, wrapping;
    /// a pair of the pairwise pass exchanges with its peer alone.
    #[test]
    fn send_recv_ring_neighbours_and_pairs() {
        assert_eq!(exchanges(Kind::SendRecv, 0, 16, None), vec![x(1, 15, 0)]);
        assert_eq!(exchanges(Kind::SendRecv, 15, 16, None), vec![x(0, 14, 0)]);
        assert_eq!(exchanges(Kind::SendRecv, 1, 2, None), vec![x(0, 0, 0)]);
        assert_eq!(
            exchanges(Kind::SendRecv, 3, 16, Some(11)),
            vec![x(11, 11, 0)]
        );
    }
}
