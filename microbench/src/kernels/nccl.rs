//! The loaded NCCL: every function microbench calls, resolved once from the file the loader
//! picked (see [`super::loader`]); what a job's ranks need of it before any of them joins
//! (issue 12): rank 0's unique id, which the rendezvous hands every rank, and the version
//! the records carry.

use super::loader::{api, dotted, table, Library, Unloadable};
use crate::error::{Error, Result};
use cudarc::nccl::sys::{
    cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

api! {
    /// NCCL's functions, with the signatures of its `nccl.h` (as cudarc binds them).
    pub(crate) struct Api {
        ncclGetVersion: fn(*mut c_int) -> ncclResult_t;
        ncclGetUniqueId: fn(*mut ncclUniqueId) -> ncclResult_t;
        ncclGetErrorString: fn(ncclResult_t) -> *const c_char;
        ncclCommInitRankConfig: fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int, *mut c_void) -> ncclResult_t;
        ncclCommSplit: fn(ncclComm_t, c_int, c_int, *mut ncclComm_t, *mut c_void) -> ncclResult_t;
        ncclCommUserRank: fn(ncclComm_t, *mut c_int) -> ncclResult_t;
        ncclCommCount: fn(ncclComm_t, *mut c_int) -> ncclResult_t;
        ncclCommGetAsyncError: fn(ncclComm_t, *mut ncclResult_t) -> ncclResult_t;
        ncclCommFinalize: fn(ncclComm_t) -> ncclResult_t;
        ncclCommAbort: fn(ncclComm_t) -> ncclResult_t;
        ncclCommDestroy: fn(ncclComm_t) -> ncclResult_t;
        ncclGroupStart: fn() -> ncclResult_t;
        ncclGroupEnd: fn() -> ncclResult_t;
        ncclAllReduce: fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) -> ncclResult_t;
        ncclAllGather: fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclComm_t, cudaStream_t) -> ncclResult_t;
        ncclReduceScatter: fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) -> ncclResult_t;
        ncclSend: fn(*const c_void, usize, ncclDataType_t, c_int, ncclComm_t, cudaStream_t) -> ncclResult_t;
        ncclRecv: fn(*mut c_void, usize, ncclDataType_t, c_int, ncclComm_t, cudaStream_t) -> ncclResult_t;
    }
}

/// NCCL's table, resolved at its first use; fails in one line naming the file and every
/// missing symbol, or every name tried.
pub(crate) fn nccl() -> Result<&'static Api> {
    static SLOT: OnceLock<Result<Api, Unloadable>> = OnceLock::new();
    table(Library::Nccl, &SLOT, Api::resolve)
}

/// NCCL's unique id, made by rank 0 and handed to every rank: its 128 bytes. Making it loads
/// NCCL and starts NCCL's bootstrap root in this process, which must live until every rank
/// has initialised. It needs no GPU.
pub fn nccl_unique_id() -> Result<Vec<u8>> {
    let api = nccl()?;
    let mut id = ncclUniqueId { internal: [0; 128] };
    // SAFETY: `id` is a valid place for the 128 bytes NCCL writes.
    let status = unsafe { (api.ncclGetUniqueId)(&mut id) };
    status.result().map_err(|e| Error::Cuda {
        call: "ncclGetUniqueId",
        gpu: 0,
        message: describe(api, e.0),
    })?;
    Ok(id.internal.iter().map(|&c| c as u8).collect())
}

/// The loaded NCCL's version, `2.27.3`, for the records; `None` when it does not load.
pub fn nccl_version() -> Option<String> {
    version_number(nccl().ok()?).map(dotted)
}

/// `ncclGetVersion`: `major * 10000 + minor * 100 + patch` since NCCL 2.9.
pub(crate) fn version_number(api: &Api) -> Option<u64> {
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid place for the version.
    let status = unsafe { (api.ncclGetVersion)(&mut v) };
    status.result().ok()?;
    u64::try_from(v).ok()
}

/// NCCL's name and description of a result, e.g. `ncclUnhandledCudaError: unhandled cuda
/// error`.
pub(crate) fn describe(api: &Api, result: ncclResult_t) -> String {
    // SAFETY: ncclGetErrorString returns a pointer to a static, NUL-terminated string for
    // every result code.
    let text = unsafe { std::ffi::CStr::from_ptr((api.ncclGetErrorString)(result)) };
    format!("{result:?}: {}", text.to_string_lossy())
}

/// NCCL's result of `call` on `gpu` as ours: success, or the error naming both.
pub(crate) fn checked(api: &Api, call: &'static str, gpu: u32, status: ncclResult_t) -> Result<()> {
    match status {
        ncclResult_t::ncclSuccess => Ok(()),
        failed => Err(Error::Cuda {
            call,
            gpu,
            message: describe(api, failed),
        }),
    }
}

/// An NCCL of test functions at the table's boundary, for what the code does with
/// communicators without a GPU: the communicator and group calls made, in order, and the
/// state `ncclCommGetAsyncError` reports, both per thread (tests run in parallel). A
/// communicator is a number ([`fake::comm`]). It behaves as NCCL does with non-blocking
/// communicators: an init makes rank r's communicator r + 1, a split of communicator p makes
/// p + 100 (none for `NCCL_SPLIT_NOCOLOR`), and both, finalize and a group end return
/// `ncclInProgress`, leaving the state to say when they are done. The enqueue calls are
/// logged and answer what a test sets ([`fake::set_enqueue`]). Calls the tests do not drive
/// fail.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;

    thread_local! {
        static CALLS: RefCell<Vec<(&'static str, usize)>> = const { RefCell::new(Vec::new()) };
        static STATE: Cell<ncclResult_t> = const { Cell::new(ncclResult_t::ncclSuccess) };
        static STATE_OF: RefCell<Option<HashMap<usize, ncclResult_t>>> = const { RefCell::new(None) };
        static PENDING: Cell<u32> = const { Cell::new(0) };
        static ENQUEUE: Cell<ncclResult_t> = const { Cell::new(ncclResult_t::ncclInternalError) };
    }

    /// Communicator `n`.
    pub(crate) fn comm(n: usize) -> ncclComm_t {
        std::ptr::without_provenance_mut(n)
    }

    /// What `ncclCommGetAsyncError` reports from now on, on this thread, for every
    /// communicator; forgets the states set for one ([`set_state_of`]) and pending polls
    /// ([`set_pending`]).
    pub(crate) fn set_state(state: ncclResult_t) {
        STATE.set(state);
        STATE_OF.set(None);
        PENDING.set(0);
    }

    /// What `ncclCommGetAsyncError` reports for communicator `n` alone, from now on.
    pub(crate) fn set_state_of(n: usize, state: ncclResult_t) {
        STATE_OF.with_borrow_mut(|s| s.get_or_insert_with(HashMap::new).insert(n, state));
    }

    /// The next `polls` calls of `ncclCommGetAsyncError`, on any communicator, report
    /// `ncclInProgress`; the state set before, after them.
    pub(crate) fn set_pending(polls: u32) {
        PENDING.set(polls);
    }

    /// What the enqueue calls (`ncclAllReduce`, `ncclSend`, ...) answer from now on, on this
    /// thread; they fail until set.
    pub(crate) fn set_enqueue(result: ncclResult_t) {
        ENQUEUE.set(result);
    }

    /// The communicator calls made on this thread since the last look, with their
    /// communicator's number.
    pub(crate) fn calls() -> Vec<(&'static str, usize)> {
        CALLS.with_borrow_mut(std::mem::take)
    }

    fn log(call: &'static str, comm: ncclComm_t) -> ncclResult_t {
        CALLS.with_borrow_mut(|c| c.push((call, comm.addr())));
        ncclResult_t::ncclSuccess
    }

    /// Finalizing is non-blocking: done when the state says so.
    unsafe extern "C" fn finalize(comm: ncclComm_t) -> ncclResult_t {
        log("ncclCommFinalize", comm);
        ncclResult_t::ncclInProgress
    }
    unsafe extern "C" fn destroy(comm: ncclComm_t) -> ncclResult_t {
        log("ncclCommDestroy", comm)
    }
    unsafe extern "C" fn abort(comm: ncclComm_t) -> ncclResult_t {
        log("ncclCommAbort", comm)
    }
    unsafe extern "C" fn async_error(comm: ncclComm_t, state: *mut ncclResult_t) -> ncclResult_t {
        let pending = PENDING.get();
        let now = if pending > 0 {
            PENDING.set(pending - 1);
            ncclResult_t::ncclInProgress
        } else {
            STATE_OF
                .with_borrow(|s| s.as_ref().and_then(|s| s.get(&comm.addr()).copied()))
                .unwrap_or(STATE.get())
        };
        // SAFETY: the caller passes a valid place for the state, as NCCL's callers must.
        unsafe { *state = now };
        ncclResult_t::ncclSuccess
    }
    unsafe extern "C" fn error_string(_: ncclResult_t) -> *const c_char {
        c"fake NCCL error".as_ptr()
    }

    /// A group's start is taken at once; its end, as a non-blocking group's, is in progress.
    unsafe extern "C" fn group_start() -> ncclResult_t {
        log("ncclGroupStart", std::ptr::null_mut())
    }
    unsafe extern "C" fn group_end() -> ncclResult_t {
        log("ncclGroupEnd", std::ptr::null_mut());
        ncclResult_t::ncclInProgress
    }
    unsafe extern "C" fn unique(_: *mut ncclUniqueId) -> ncclResult_t {
        ncclResult_t::ncclSuccess
    }
    unsafe extern "C" fn init(
        made: *mut ncclComm_t,
        _: c_int,
        _: ncclUniqueId,
        rank: c_int,
        _: *mut c_void,
    ) -> ncclResult_t {
        let comm = comm(rank as usize + 1);
        // SAFETY: the caller passes a valid place for the handle, as NCCL's callers must.
        unsafe { *made = comm };
        log("ncclCommInitRankConfig", comm);
        ncclResult_t::ncclInProgress
    }
    unsafe extern "C" fn split(
        parent: ncclComm_t,
        color: c_int,
        _: c_int,
        made: *mut ncclComm_t,
        _: *mut c_void,
    ) -> ncclResult_t {
        log("ncclCommSplit", parent);
        let child = if color == -1 {
            std::ptr::null_mut()
        } else {
            comm(parent.addr() + 100)
        };
        // SAFETY: as for `init`.
        unsafe { *made = child };
        ncclResult_t::ncclInProgress
    }

    const NO: ncclResult_t = ncclResult_t::ncclInternalError;
    unsafe extern "C" fn int_out(_: *mut c_int) -> ncclResult_t {
        NO
    }
    unsafe extern "C" fn comm_int(_: ncclComm_t, _: *mut c_int) -> ncclResult_t {
        NO
    }

    /// An enqueue call: logged, answered as [`set_enqueue`] says.
    fn enqueued(call: &'static str, comm: ncclComm_t) -> ncclResult_t {
        log(call, comm);
        ENQUEUE.get()
    }
    unsafe extern "C" fn all_reduce(
        _: *const c_void,
        _: *mut c_void,
        _: usize,
        _: ncclDataType_t,
        _: ncclRedOp_t,
        comm: ncclComm_t,
        _: cudaStream_t,
    ) -> ncclResult_t {
        enqueued("ncclAllReduce", comm)
    }
    unsafe extern "C" fn reduce_scatter(
        _: *const c_void,
        _: *mut c_void,
        _: usize,
        _: ncclDataType_t,
        _: ncclRedOp_t,
        comm: ncclComm_t,
        _: cudaStream_t,
    ) -> ncclResult_t {
        enqueued("ncclReduceScatter", comm)
    }
    unsafe extern "C" fn gather(
        _: *const c_void,
        _: *mut c_void,
        _: usize,
        _: ncclDataType_t,
        comm: ncclComm_t,
        _: cudaStream_t,
    ) -> ncclResult_t {
        enqueued("ncclAllGather", comm)
    }
    unsafe extern "C" fn send(
        _: *const c_void,
        _: usize,
        _: ncclDataType_t,
        _: c_int,
        comm: ncclComm_t,
        _: cudaStream_t,
    ) -> ncclResult_t {
        enqueued("ncclSend", comm)
    }
    unsafe extern "C" fn recv(
        _: *mut c_void,
        _: usize,
        _: ncclDataType_t,
        _: c_int,
        comm: ncclComm_t,
        _: cudaStream_t,
    ) -> ncclResult_t {
        enqueued("ncclRecv", comm)
    }

    /// The fake's table.
    pub(crate) static API: Api = Api {
        ncclGetVersion: int_out,
        ncclGetUniqueId: unique,
        ncclGetErrorString: error_string,
        ncclCommInitRankConfig: init,
        ncclCommSplit: split,
        ncclCommUserRank: comm_int,
        ncclCommCount: comm_int,
        ncclCommGetAsyncError: async_error,
        ncclCommFinalize: finalize,
        ncclCommAbort: abort,
        ncclCommDestroy: destroy,
        ncclGroupStart: group_start,
        ncclGroupEnd: group_end,
        ncclAllReduce: all_reduce,
        ncclAllGather: gather,
        ncclReduceScatter: reduce_scatter,
        ncclSend: send,
        ncclRecv: recv,
    };
}
