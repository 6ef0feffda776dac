//! NCCL communicators that never block the calling thread, so a deadline can stop them: a
//! blocking `ncclCommInitRank` or `ncclGroupEnd` waits for every rank for good, and a rank
//! that died before its call would hold the others there. Each is made with
//! `ncclCommInitRankConfig` (blocking = 0); every call may then return `ncclInProgress`, and
//! `ncclCommGetAsyncError` is polled until it says done, an error, or the deadline passes, when
//! the communicator is aborted (`ncclCommAbort`), which ends its pending work. One that
//! finished its work is closed as NCCL asks ([`close`]): finalized, then destroyed.

use super::nccl::{checked, describe, Api};
use super::timer::cuda;
use crate::error::{Error, Result};
use cudarc::driver::CudaContext;
use cudarc::nccl::sys::{ncclComm_t, ncclResult_t, ncclUniqueId};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between polls of a pending communicator.
const POLL: Duration = Duration::from_micros(200);

/// `ncclConfig_t` as NCCL 2.18 laid it out (`nccl.h`): NCCL reads `size` bytes of it and
/// leaves later fields at their defaults, so this head is valid for 2.18 and later.
#[repr(C)]
struct Config {
    size: usize,
    magic: c_uint,
    version: c_uint,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
}

/// `NCCL_CONFIG_UNDEF_INT`: a field NCCL fills with its default.
const UNDEF: c_int = c_int::MIN;

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` with `blocking = 0`.
    fn nonblocking() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            // NCCL_VERSION(2, 18, 0): the release whose config this is.
            version: 21800,
            blocking: 0,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
        }
    }
}

/// How a wait for a pending communicator ended, when it did not end done.
#[derive(Debug, PartialEq)]
pub(super) enum Unfinished {
    /// NCCL reported this error.
    Failed(ncclResult_t),
    /// Still in progress at the deadline.
    TimedOut,
}

/// Polls `state` (a communicator's `ncclCommGetAsyncError`) until it is not in progress, at
/// most `timeout`.
pub(super) fn wait(
    state: &dyn Fn() -> ncclResult_t,
    timeout: Duration,
) -> std::result::Result<(), Unfinished> {
    let start = Instant::now();
    loop {
        match state() {
            ncclResult_t::ncclSuccess => return Ok(()),
            ncclResult_t::ncclInProgress if start.elapsed() < timeout => std::thread::sleep(POLL),
            ncclResult_t::ncclInProgress => return Err(Unfinished::TimedOut),
            failed => return Err(Unfinished::Failed(failed)),
        }
    }
}

/// `comm`'s state, or the error of asking for it.
fn state(api: &Api, comm: ncclComm_t) -> ncclResult_t {
    let mut state = ncclResult_t::ncclSuccess;
    // SAFETY: `comm` is a live communicator and `state` a valid place for its state.
    let asked = unsafe { (api.ncclCommGetAsyncError)(comm, &mut state) };
    if asked == ncclResult_t::ncclSuccess {
        state
    } else {
        asked
    }
}

/// When a wait that may span several communicators ends, and how long it was, for the
/// message.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    of: Duration,
}

impl Deadline {
    /// `of` from now.
    fn after(of: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + of,
            of,
        }
    }

    /// What is left of it (none once it passed: a communicator is then polled once).
    fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }
}

/// Waits for `comm`, made or used by `call` on `gpu`, until `deadline`; on failure or
/// timeout the error names the call, and `comm` is aborted when `abort` is set.
fn ready(
    api: &'static Api,
    comm: ncclComm_t,
    (call, gpu): (&'static str, u32),
    deadline: Deadline,
    abort: bool,
) -> Result<()> {
    let waited = wait(&|| state(api, comm), deadline.left());
    let message = match waited {
        Ok(()) => return Ok(()),
        Err(Unfinished::Failed(e)) => describe(api, e),
        Err(Unfinished::TimedOut) => format!(
            "not done after {} s: a rank of the job stopped or never called it, or the ranks \
             cannot reach each other (check NCCL_SOCKET_IFNAME and the firewall; \
             NCCL_DEBUG=INFO shows where it waits)",
            deadline.of.as_secs_f64()
        ),
    };
    if abort {
        // SAFETY: `comm` is not used again by the caller after an error.
        unsafe { (api.ncclCommAbort)(comm) };
    }
    Err(Error::Cuda { call, gpu, message })
}

/// Waits for every one of `comms` (each with its GPU), made or used by `call`, under one
/// `deadline`, so that n communicators wait no longer than one; the first that fails or is
/// still pending at the deadline ends the wait. None is aborted here: the caller aborts
/// them all.
fn ready_all(
    api: &'static Api,
    comms: &[(ncclComm_t, u32)],
    call: &'static str,
    deadline: Deadline,
) -> Result<()> {
    comms
        .iter()
        .try_for_each(|&(comm, gpu)| ready(api, comm, (call, gpu), deadline, false))
}

/// Runs `enqueue` inside one NCCL group (`gpu` names the group's calls in errors); the
/// group is closed even when `enqueue` fails, so that it does not swallow the next calls,
/// and `enqueue`'s error, the first, is the one reported. A group of non-blocking
/// communicators may end in progress (`ncclInProgress`): the caller then waits for them.
fn grouped(api: &'static Api, gpu: u32, enqueue: impl FnOnce() -> Result<()>) -> Result<()> {
    // SAFETY: group calls take no arguments.
    taken(
        api,
        unsafe { (api.ncclGroupStart)() },
        "ncclGroupStart",
        gpu,
    )?;
    let enqueued = enqueue();
    // SAFETY: as above.
    let ended = taken(api, unsafe { (api.ncclGroupEnd)() }, "ncclGroupEnd", gpu);
    enqueued.and(ended)
}

/// An open group of [`group`]: what its enqueue calls' answers are checked against, under
/// the group's one deadline.
pub(super) struct Open {
    api: &'static Api,
    deadline: Deadline,
}

impl Open {
    /// NCCL's answer `status` to `call` on `comm` (on `gpu`) inside the group. Done, or in
    /// progress: NCCL's guide lets any call on a non-blocking communicator answer
    /// `ncclInProgress` (`ncclCommGetAsyncError`: the call is still being enqueued in the
    /// background) and asks that the communicator then be polled until done before any
    /// other call, which is done here under the group's deadline. (NCCL's own enqueue, 2.14
    /// to 2.29, answers with the communicator's state, which inside a group is in progress
    /// only where it already was, and that it refuses: this keeps to the guide, not to an
    /// answer seen.) Otherwise the error names the call.
    pub(super) fn taken(
        &self,
        comm: ncclComm_t,
        call: &'static str,
        gpu: u32,
        status: ncclResult_t,
    ) -> Result<()> {
        match status {
            ncclResult_t::ncclSuccess => Ok(()),
            ncclResult_t::ncclInProgress => {
                ready(self.api, comm, (call, gpu), self.deadline, false)
            }
            failed => Err(Error::Cuda {
                call,
                gpu,
                message: describe(self.api, failed),
            }),
        }
    }
}

/// Runs `enqueue`, which enqueues work on `comms` (each with its GPU), inside one NCCL
/// group, and waits for them all to be done with it, under one deadline `timeout` away
/// from the group's start, which the enqueue's calls also wait under ([`Open::taken`]): as
/// NCCL asks of non-blocking communicators, whose `ncclGroupEnd` may return
/// `ncclInProgress` while it connects to the peers and enqueues. On an error or at the
/// deadline the caller aborts `comms`, which may still be enqueueing.
pub(super) fn group(
    api: &'static Api,
    comms: &[(ncclComm_t, u32)],
    timeout: Duration,
    enqueue: impl FnOnce(&Open) -> Result<()>,
) -> Result<()> {
    let gpu = comms.first().map_or(0, |&(_, g)| g);
    let open = Open {
        api,
        deadline: Deadline::after(timeout),
    };
    grouped(api, gpu, || enqueue(&open))?;
    ready_all(api, comms, "ncclGroupEnd", open.deadline)
}

/// Fails unless NCCL took the call, done or in progress.
fn taken(api: &'static Api, status: ncclResult_t, call: &'static str, gpu: u32) -> Result<()> {
    match status {
        ncclResult_t::ncclSuccess | ncclResult_t::ncclInProgress => Ok(()),
        failed => Err(Error::Cuda {
            call,
            gpu,
            message: describe(api, failed),
        }),
    }
}

/// Rank `rank` of `world` from rank 0's `unique` id, non-blocking, on the current thread's
/// CUDA device (`gpu`'s context must be bound); ready, or aborted past `timeout`.
pub(super) fn init_rank(
    api: &'static Api,
    gpu: u32,
    (rank, world): (u32, u32),
    unique: ncclUniqueId,
    timeout: Duration,
) -> Result<ncclComm_t> {
    let call = "ncclCommInitRankConfig";
    let mut comm: ncclComm_t = std::ptr::null_mut();
    let mut config = Config::nonblocking();
    // SAFETY: `comm` is a valid place for the handle and `config` a live, initialised
    // config that NCCL reads during the call.
    let status = unsafe {
        (api.ncclCommInitRankConfig)(
            &mut comm,
            world as c_int,
            unique,
            rank as c_int,
            (&mut config as *mut Config).cast::<c_void>(),
        )
    };
    taken(api, status, call, gpu)?;
    ready(api, comm, (call, gpu), Deadline::after(timeout), true)?;
    Ok(comm)
}

/// One communicator per context of `gpus`, all driven by this thread, ranks 0 to n-1 in
/// their order: what `ncclCommInitAll` makes, here as n non-blocking inits in one NCCL group
/// (`ncclCommInitAll` has no deadline); all ready, or all aborted past `timeout`.
pub(super) fn init_all(
    api: &'static Api,
    gpus: &[(Arc<CudaContext>, u32)],
    timeout: Duration,
) -> Result<Vec<ncclComm_t>> {
    let ids: Vec<u32> = gpus.iter().map(|&(_, g)| g).collect();
    // NCCL takes the current context as the rank's device.
    let bind = |rank: usize| {
        let (ctx, gpu) = &gpus[rank];
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent", *gpu))
    };
    init_each(api, &ids, &bind, timeout)
}

/// [`init_all`] on `gpus`, with `bind` making rank r's GPU the thread's current device.
fn init_each(
    api: &'static Api,
    gpus: &[u32],
    bind: &dyn Fn(usize) -> Result<()>,
    timeout: Duration,
) -> Result<Vec<ncclComm_t>> {
    let call = "ncclCommInitRankConfig (one process, every GPU)";
    let first = gpus.first().copied().unwrap_or(0);
    let mut unique = ncclUniqueId { internal: [0; 128] };
    // SAFETY: `unique` is a valid place for the id.
    taken(
        api,
        unsafe { (api.ncclGetUniqueId)(&mut unique) },
        "ncclGetUniqueId",
        first,
    )?;
    let n = gpus.len() as c_int;
    let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); gpus.len()];
    // One config per rank, alive until every init is done.
    let mut configs: Vec<Config> = gpus.iter().map(|_| Config::nonblocking()).collect();
    let made = grouped(api, first, || {
        gpus.iter()
            .zip(comms.iter_mut().zip(configs.iter_mut()))
            .enumerate()
            .try_for_each(|(rank, (gpu, (comm, config)))| {
                bind(rank)?;
                // SAFETY: `comm` and `config` are valid and outlive the group.
                let status = unsafe {
                    (api.ncclCommInitRankConfig)(
                        comm,
                        n,
                        unique,
                        rank as c_int,
                        (config as *mut Config).cast::<c_void>(),
                    )
                };
                taken(api, status, call, *gpu)
            })
    })
    .and_then(|()| {
        let each: Vec<(ncclComm_t, u32)> =
            comms.iter().copied().zip(gpus.iter().copied()).collect();
        ready_all(api, &each, call, Deadline::after(timeout))
    });
    if let Err(e) = made {
        for &comm in comms.iter().filter(|c| !c.is_null()) {
            // SAFETY: each is a communicator of the failed group, never used again.
            unsafe { (api.ncclCommAbort)(comm) };
        }
        return Err(e);
    }
    Ok(comms)
}

/// This rank's part of `ncclCommSplit` of `parent` (non-blocking, as the parent is: a null
/// config inherits its settings); the new communicator, ready, or null for no color. The
/// parent and the new one are waited for under one deadline; a new one that is not ready
/// by then, or whose parent is not, is aborted (the parent is its owner's to close).
pub(super) fn split(
    api: &'static Api,
    parent: ncclComm_t,
    gpu: u32,
    (color, key): (c_int, c_int),
    timeout: Duration,
) -> Result<ncclComm_t> {
    let call = "ncclCommSplit";
    let mut comm: ncclComm_t = std::ptr::null_mut();
    // SAFETY: `parent` is a live communicator; `comm` is a valid place for the handle.
    let status =
        unsafe { (api.ncclCommSplit)(parent, color, key, &mut comm, std::ptr::null_mut()) };
    taken(api, status, call, gpu)?;
    let deadline = Deadline::after(timeout);
    // The parent's part first: a rank without a color gets no communicator to poll.
    if let Err(e) = ready(api, parent, (call, gpu), deadline, false) {
        if !comm.is_null() {
            // SAFETY: `comm` is the split's pending communicator, never handed out.
            unsafe { (api.ncclCommAbort)(comm) };
        }
        return Err(e);
    }
    if !comm.is_null() {
        ready(api, comm, (call, gpu), deadline, true)?;
    }
    Ok(comm)
}

/// Closes `comms` (each with its GPU), communicators that finished their work, as NCCL's
/// guide asks: `ncclCommFinalize` on every one first (a thread driving several ranks asks
/// them all before waiting, as each rank's finalize waits for its peers'), each polled until
/// done, all under one deadline `timeout` away, then `ncclCommDestroy`, which then frees
/// only this process's resources. When a finalize fails or is not done in time, every one
/// is aborted instead (`ncclCommAbort` ends what is pending, where a destroy would wait for
/// it) and the error is the finalize's. Every communicator is gone on return.
pub(super) fn close(
    api: &'static Api,
    comms: &[(ncclComm_t, u32)],
    timeout: Duration,
) -> Result<()> {
    let call = "ncclCommFinalize";
    let deadline = Deadline::after(timeout);
    let finalized = comms
        .iter()
        .try_for_each(|&(comm, gpu)| {
            // SAFETY: `comm` is a live communicator, finalized once.
            taken(api, unsafe { (api.ncclCommFinalize)(comm) }, call, gpu)
        })
        .and_then(|()| {
            comms
                .iter()
                .try_for_each(|&(comm, gpu)| ready(api, comm, (call, gpu), deadline, false))
        });
    if let Err(e) = finalized {
        for &(comm, _) in comms {
            // SAFETY: each is a live communicator of the group, never used again; abort
            // frees one whose finalize did not finish as well as one it never reached.
            unsafe { (api.ncclCommAbort)(comm) };
        }
        return Err(e);
    }
    // Every one is destroyed; the first failure is the one reported.
    let mut destroyed = Ok(());
    for &(comm, gpu) in comms {
        // SAFETY: `comm` is finalized and destroyed once, never used again.
        let status = unsafe { (api.ncclCommDestroy)(comm) };
        destroyed = destroyed.and(checked(api, "ncclCommDestroy", gpu, status));
    }
    destroyed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A communicator that finishes after three polls is waited for; one that never does is
    /// given up at the deadline; an asynchronous error ends the wait at once.
    #[test]
    fn a_pending_communicator_is_polled_until_done_failed_or_the_deadline() {
        let polls = Cell::new(0);
        let done_after_3 = || {
            polls.set(polls.get() + 1);
            if polls.get() < 3 {
                ncclResult_t::ncclInProgress
            } else {
                ncclResult_t::ncclSuccess
            }
        };
        assert_eq!(wait(&done_after_3, Duration::from_secs(5)), Ok(()));
        assert_eq!(polls.get(), 3);
        let start = Instant::now();
        let hung = wait(&|| ncclResult_t::ncclInProgress, Duration::from_millis(20));
        assert_eq!(hung, Err(Unfinished::TimedOut));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(
            wait(&|| ncclResult_t::ncclRemoteError, Duration::from_secs(60)),
            Err(Unfinished::Failed(ncclResult_t::ncclRemoteError))
        );
    }

    use crate::kernels::nccl::fake;

    /// Two communicators, 1 and 2, on GPUs 0 and 1.
    const PAIR: [(ncclComm_t, u32); 2] = [
        (std::ptr::without_provenance_mut(1), 0),
        (std::ptr::without_provenance_mut(2), 1),
    ];

    /// A group of collectives on non-blocking communicators whose `ncclGroupEnd` returns
    /// `ncclInProgress`, as NCCL's does while it connects to the peers, is waited for until
    /// every communicator says done (issue 29: it was refused as an error at once); one still
    /// in progress is given up at one deadline for all of them, not one each, with an error
    /// naming ncclGroupEnd; an asynchronous error ends the wait.
    #[test]
    fn a_group_end_in_progress_is_waited_for_until_done_or_the_deadline() {
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_pending(3);
        let enqueued = Cell::new(false);
        group(&fake::API, &PAIR, Duration::from_secs(5), |_| {
            enqueued.set(true);
            Ok(())
        })
        .unwrap();
        assert!(enqueued.get());
        assert_eq!(fake::calls(), [("ncclGroupStart", 0), ("ncclGroupEnd", 0)]);

        fake::set_state(ncclResult_t::ncclInProgress);
        let timeout = Duration::from_secs(1);
        let start = Instant::now();
        let err = group(&fake::API, &PAIR, timeout, |_| Ok(()))
            .unwrap_err()
            .to_string();
        let took = start.elapsed();
        // One deadline for the pair, not one each (2 s), with room for a loaded machine.
        assert!(
            took >= timeout && took < Duration::from_millis(1_900),
            "{took:?}"
        );
        assert!(err.contains("ncclGroupEnd"), "{err}");
        assert!(err.contains("not done after 1 s"), "{err}");

        fake::set_state(ncclResult_t::ncclRemoteError);
        let err = group(&fake::API, &PAIR, Duration::from_secs(60), |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ncclRemoteError"), "{err}");
        // Nothing aborted here: the caller aborts the group (measure_loops).
        assert_eq!(
            fake::calls(),
            [
                ("ncclGroupStart", 0),
                ("ncclGroupEnd", 0),
                ("ncclGroupStart", 0),
                ("ncclGroupEnd", 0)
            ]
        );
    }

    /// A communicator that is done late leaves the next only what is left of the one
    /// deadline: 2 still pending when 1 is done after at least 5,000 polls (200 us each) is
    /// given up 2 s after the start, where a deadline each would wait 3 s or more (the margin
    /// is for a loaded machine's scheduling).
    #[test]
    fn one_deadline_spans_every_communicator_of_a_group() {
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_state_of(2, ncclResult_t::ncclInProgress);
        fake::set_pending(5_000);
        let timeout = Duration::from_secs(2);
        let start = Instant::now();
        let err = group(&fake::API, &PAIR, timeout, |_| Ok(())).unwrap_err();
        let took = start.elapsed();
        assert!(
            took >= timeout && took < Duration::from_millis(2_900),
            "{took:?}"
        );
        assert!(
            matches!(
                err,
                Error::Cuda {
                    call: "ncclGroupEnd",
                    gpu: 1,
                    ..
                }
            ),
            "{err}"
        );
        fake::calls();
    }

    /// An enqueue that fails still has its group closed, and its error is the one reported.
    #[test]
    fn a_failed_enqueue_still_closes_the_group() {
        fake::set_state(ncclResult_t::ncclSuccess);
        let err = group(&fake::API, &PAIR, Duration::from_secs(5), |_| {
            Err(Error::Cuda {
                call: "ncclAllReduce",
                gpu: 1,
                message: "refused".into(),
            })
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("ncclAllReduce"), "{err}");
        assert_eq!(fake::calls(), [("ncclGroupStart", 0), ("ncclGroupEnd", 0)]);
    }

    /// One process's inits of every GPU, in one group that ends in progress, are waited for
    /// until done; still in progress at the deadline, one deadline for all of them, every
    /// one is aborted.
    #[test]
    fn a_one_process_init_is_waited_for_or_aborted_at_the_deadline() {
        let bound = Cell::new(0);
        let bind = |_: usize| {
            bound.set(bound.get() + 1);
            Ok(())
        };
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_pending(4);
        let comms = init_each(&fake::API, &[0, 1], &bind, Duration::from_secs(5)).unwrap();
        assert_eq!(comms, [fake::comm(1), fake::comm(2)]);
        assert_eq!(bound.get(), 2);
        let made = [
            ("ncclGroupStart", 0),
            ("ncclCommInitRankConfig", 1),
            ("ncclCommInitRankConfig", 2),
            ("ncclGroupEnd", 0),
        ];
        assert_eq!(fake::calls(), made);

        fake::set_state(ncclResult_t::ncclInProgress);
        let timeout = Duration::from_millis(300);
        let start = Instant::now();
        let err = init_each(&fake::API, &[0, 1], &bind, timeout)
            .unwrap_err()
            .to_string();
        let took = start.elapsed();
        assert!(took >= timeout && took < 2 * timeout, "{took:?}");
        assert!(err.contains("not done after 0.3 s"), "{err}");
        let mut aborted = made.to_vec();
        aborted.extend([("ncclCommAbort", 1), ("ncclCommAbort", 2)]);
        assert_eq!(fake::calls(), aborted);
    }

    /// A job rank's init still in progress at its deadline is aborted, and so is one that
    /// reports an asynchronous error; one done after a few polls is handed out.
    #[test]
    fn a_job_rank_s_init_is_aborted_at_the_deadline() {
        let unique = ncclUniqueId { internal: [0; 128] };
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_pending(3);
        let comm = init_rank(&fake::API, 3, (2, 4), unique, Duration::from_secs(5)).unwrap();
        assert_eq!(comm, fake::comm(3));
        assert_eq!(fake::calls(), [("ncclCommInitRankConfig", 3)]);

        fake::set_state(ncclResult_t::ncclInProgress);
        let timeout = Duration::from_millis(30);
        let start = Instant::now();
        let err = init_rank(&fake::API, 3, (2, 4), unique, timeout).unwrap_err();
        assert!(start.elapsed() >= timeout);
        assert!(
            matches!(&err, Error::Cuda { call: "ncclCommInitRankConfig", gpu: 3, message }
                if message.starts_with("not done after 0.03 s")),
            "{err}"
        );
        let aborted = [("ncclCommInitRankConfig", 3), ("ncclCommAbort", 3)];
        assert_eq!(fake::calls(), aborted);

        fake::set_state(ncclResult_t::ncclRemoteError);
        let err = init_rank(&fake::API, 3, (2, 4), unique, Duration::from_secs(60))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ncclRemoteError"), "{err}");
        assert_eq!(fake::calls(), aborted);
    }

    /// A split whose new communicator (101, of parent 1) is still in progress at the
    /// deadline has it aborted, and so when the parent's part is (issue 29: it was left
    /// pending, never aborted nor handed out); the parent is its owner's to close. A rank
    /// without a color gets none; a finished split hands the new one out.
    #[test]
    fn a_split_not_done_at_the_deadline_aborts_its_new_communicator() {
        let parent = fake::comm(1);
        let timeout = Duration::from_millis(30);
        let aborted = [("ncclCommSplit", 1), ("ncclCommAbort", 101)];
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_state_of(101, ncclResult_t::ncclInProgress);
        let err = split(&fake::API, parent, 0, (0, 5), timeout).unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Cuda {
                    call: "ncclCommSplit",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(fake::calls(), aborted);

        fake::set_state(ncclResult_t::ncclInProgress);
        let start = Instant::now();
        assert!(split(&fake::API, parent, 0, (0, 5), timeout).is_err());
        assert!(start.elapsed() >= timeout);
        assert_eq!(fake::calls(), aborted);

        fake::set_state(ncclResult_t::ncclSuccess);
        let none = split(&fake::API, parent, 0, (-1, 5), timeout).unwrap();
        assert!(none.is_null());
        let made = split(&fake::API, parent, 0, (0, 5), timeout).unwrap();
        assert_eq!(made, fake::comm(101));
        assert_eq!(fake::calls(), [("ncclCommSplit", 1), ("ncclCommSplit", 1)]);
    }

    /// The parent's part and the new communicator's share one deadline: the new one still
    /// pending when the parent is done after at least 5,000 polls (200 us each) is given up
    /// 2 s after the start, where a deadline each would wait 3 s or more.
    #[test]
    fn a_split_waits_under_one_deadline() {
        fake::set_state(ncclResult_t::ncclSuccess);
        fake::set_state_of(101, ncclResult_t::ncclInProgress);
        fake::set_pending(5_000);
        let timeout = Duration::from_secs(2);
        let start = Instant::now();
        assert!(split(&fake::API, fake::comm(1), 0, (0, 5), timeout).is_err());
        let took = start.elapsed();
        assert!(
            took >= timeout && took < Duration::from_millis(2_900),
            "{took:?}"
        );
        assert_eq!(
            fake::calls(),
            [("ncclCommSplit", 1), ("ncclCommAbort", 101)]
        );
    }

    /// The config NCCL_CONFIG_INITIALIZER makes, with blocking = 0, on 64-bit Linux: 48 bytes
    /// (a size_t, two uints, four ints, a pointer, an int and its padding).
    #[test]
    fn the_config_is_nccl_s_layout_with_blocking_off() {
        let c = Config::nonblocking();
        assert_eq!((c.size, c.magic, c.blocking), (48, 0xcafe_beef, 0));
        assert_eq!(c.cga_cluster_size, i32::MIN);
    }
}
