//! The loaded cuBLASLt (CUDA 12's `libcublasLt.so.12` or CUDA 13's `.so.13`): every function
//! the GEMMs call, resolved once from the file the loader picked (see [`super::loader`]).

use super::loader::{api, dotted, table, Library, Unloadable};
use crate::error::Result;
use cudarc::cublaslt::sys::{
    cublasComputeType_t, cublasLtHandle_t, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t,
    cublasLtMatmulDesc_t, cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t,
    cublasLtMatmulPreference_t, cublasLtMatrixLayout_t, cublasStatus_t, cudaDataType, cudaStream_t,
};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type Layout = cublasLtMatrixLayout_t;

api! {
    /// cuBLASLt's functions, with the signatures of its `cublasLt.h` (as cudarc binds them).
    pub(crate) struct Api {
        cublasLtGetVersion: fn() -> usize;
        cublasLtCreate: fn(*mut cublasLtHandle_t) -> cublasStatus_t;
        cublasLtDestroy: fn(cublasLtHandle_t) -> cublasStatus_t;
        cublasLtMatmulDescCreate: fn(*mut cublasLtMatmulDesc_t, cublasComputeType_t, cudaDataType) -> cublasStatus_t;
        cublasLtMatmulDescDestroy: fn(cublasLtMatmulDesc_t) -> cublasStatus_t;
        cublasLtMatmulDescSetAttribute: fn(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, *const c_void, usize) -> cublasStatus_t;
        cublasLtMatrixLayoutCreate: fn(*mut Layout, cudaDataType, u64, u64, i64) -> cublasStatus_t;
        cublasLtMatrixLayoutDestroy: fn(Layout) -> cublasStatus_t;
        cublasLtMatmulPreferenceCreate: fn(*mut cublasLtMatmulPreference_t) -> cublasStatus_t;
        cublasLtMatmulPreferenceDestroy: fn(cublasLtMatmulPreference_t) -> cublasStatus_t;
        cublasLtMatmulPreferenceSetAttribute: fn(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, *const c_void, usize) -> cublasStatus_t;
        cublasLtMatmulAlgoGetHeuristic: fn(cublasLtHandle_t, cublasLtMatmulDesc_t, Layout, Layout, Layout, Layout, cublasLtMatmulPreference_t, c_int, *mut cublasLtMatmulHeuristicResult_t, *mut c_int) -> cublasStatus_t;
        cublasLtMatmul: fn(cublasLtHandle_t, cublasLtMatmulDesc_t, *const c_void, *const c_void, Layout, *const c_void, Layout, *const c_void, *const c_void, Layout, *mut c_void, Layout, *const cublasLtMatmulAlgo_t, *mut c_void, usize, cudaStream_t) -> cublasStatus_t;
    }
}

/// cuBLASLt's table, resolved at its first use; fails in one line naming the file and every
/// missing symbol, or every name tried.
pub(crate) fn cublaslt() -> Result<&'static Api> {
    static SLOT: OnceLock<Result<Api, Unloadable>> = OnceLock::new();
    table(Library::CublasLt, &SLOT, Api::resolve)
}

/// The loaded cuBLASLt's version, `12.9.3` (`cublasLtGetVersion`, which needs no GPU).
pub fn cublaslt_version() -> Option<String> {
    let api = cublaslt().ok()?;
    // SAFETY: cublasLtGetVersion takes nothing and only returns a number.
    let v = unsafe { (api.cublasLtGetVersion)() };
    Some(dotted(v as u64))
}
