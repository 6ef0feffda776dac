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
