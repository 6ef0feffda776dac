//! GEMM: bf16, fp16 and tf32 through cuBLAS (`cublasGemmEx`), fp8 through cuBLASLt (which
//! alone takes fp8 operands), all with fp32 accumulation.

use super::loader::{check_libraries, Library};
use super::summarize;
use super::timer::{cuda, time_iterations, Wait};
use crate::error::{Error, Result};
use crate::plan::tensor_core_capability;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use record::{Clock, Dtype, Gemm, Timing};
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLAS operand and compute types of the non-fp8 tensor-core types.
fn types(dtype: Dtype) -> Option<(cudaDataType, cublasComputeType_t)> {
    match dtype {
        Dtype::Bf16 => Some((
            cudaDataType::CUDA_R_16BF,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )),
        Dtype::Fp16 => Some((
            cudaDataType::CUDA_R_16F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )),
        Dtype::Tf32 => Some((
            cudaDataType::CUDA_R_32F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        )),
        _ => None,
    }
}

/// Times C = A.B on one GPU with CUDA events: fp8 through cuBLASLt, the rest through cuBLAS.
pub(super) fn measure(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    cc: [u32; 2],
    shape: Gemm,
    dtype: Dtype,
    iters: u32,
    warmup: u32,
) -> Result<Timing> {
    let unsupported = |reason: String| Error::Unsupported {
        what: format!("{dtype} GEMM"),
        gpu,
        reason,
    };
    match tensor_core_capability(dtype) {
        None => {
            return Err(unsupported(
                "expected bf16, fp16, tf32, fp8_e4m3 or fp8_e5m2".into(),
            ))
        }
        Some(min) if cc < min => {
            return Err(unsupported(format!(
                "its tensor cores need compute capability {}.{} or later, this GPU has {}.{}",
                min[0], min[1], cc[0], cc[1]
            )))
        }
        Some(_) => {}
    }
    match types(dtype) {
        Some(types) => {
            check_libraries(&[Library::Cublas])?;
            measure_gemm_ex(ctx, gpu, shape, types, dtype, iters, warmup)
        }

        None => {
            check_libraries(&[Library::CublasLt])?;
            lt::measure(ctx, gpu, shape, dtype, iters, warmup)
        }
    }
}

/// Converts a GEMM dimension to cuBLAS's int.
fn dim(v: u64) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::BadValue {
        field: "gemm shape",
        value: v.to_string(),
        expected: "at most 2^31-1".into(),
    })
}

/// C = A.B (column-major, no transposes) through cublasGemmEx.
fn measure_gemm_ex(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    shape: Gemm,
    (data_type, compute): (cudaDataType, cublasComputeType_t),
    dtype: Dtype,
    iters: u32,
    warmup: u32,
) -> Result<Timing> {
    let dim = |v: u64| {
        i32::try_from(v).map_err(|_| Error::BadValue {
            field: "gemm shape",
            value: v.to_string(),
            expected: "at most 2^31-1".into(),
        })
    };
    let (m, n, k) = (dim(shape.m)?, dim(shape.n)?, dim(shape.k)?);
    let stream = ctx.new_stream().map_err(cuda("cuStreamCreate", gpu))?;
    let es = dtype.size_bytes() as usize;
    let alloc = |elems: u64| {
        stream
            .alloc_zeros::<u8>(elems as usize * es)
            .map_err(cuda("cuMemAlloc", gpu))
    };
    let a = alloc(shape.m * shape.k)?;
    let b = alloc(shape.k * shape.n)?;
    let mut c = alloc(shape.m * shape.n)?;
    let blas = CudaBlas::new(stream.clone()).map_err(|e| Error::Cuda {
        call: "cublasCreate",
        gpu,
        message: e.to_string(),
    })?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (pa, _ga) = a.device_ptr(&stream);
    let (pb, _gb) = b.device_ptr(&stream);
    let (pc, _gc) = c.device_ptr_mut(&stream);
    let step = || {
        // SAFETY: A, B and C are live device buffers of m*k, k*n and m*n elements of the
        // operand type on this GPU, the leading dimensions match, and alpha and beta are f32
        // as CUBLAS_COMPUTE_32F* requires.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                (&alpha as *const f32).cast::<c_void>(),
                pa as *const c_void,
                data_type,
                m,
                pb as *const c_void,
                data_type,
                k,
                (&beta as *const f32).cast::<c_void>(),
                pc as *mut c_void,
                data_type,
                m,
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| Error::Cuda {
            call: "cublasGemmEx",
            gpu,
            message: e.to_string(),
        })
    };
    let mut samples = time_iterations(&[(gpu, stream.clone())], iters, warmup, Wait::Block, step)?;
    Ok(summarize(&mut samples, Clock::CudaEvent))
}

/// fp8 GEMM through cuBLASLt. FP8 kernels want A transposed ("TN": A stored k x m) and take a
/// bf16 C/D; e5m2 pairs with an e4m3 B, since cuBLASLt has no e5m2 x e5m2 kernel. Scales are
/// left unset, which cuBLASLt reads as 1.
mod lt {
    use super::super::summarize;
    use super::super::timer::{cuda, time_iterations, Wait};
    use super::dim;
    use crate::error::{Error, Result};
    use cudarc::cublaslt::result as lt;
    use cudarc::cublaslt::sys::{
        cublasComputeType_t, cublasLtHandle_t, cublasLtMatmulDescAttributes_t,
        cublasLtMatmulDesc_t, cublasLtMatmulPreferenceAttributes_t, cublasLtMatmulPreference_t,
        cublasLtMatrixLayout_t, cudaDataType,
    };
    // cuBLASLt takes cuBLAS's operation enum for TRANSA.
    use cudarc::cublas::sys::cublasOperation_t;
    use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    use record::{Clock, Dtype, Gemm, Timing};
    use std::ffi::c_void;
    use std::sync::Arc;

    /// cuBLASLt's recommended workspace on Hopper.
    const WORKSPACE_BYTES: usize = 32 << 20;

    /// cuBLASLt objects, destroyed when dropped.
    struct Objects {
        handle: cublasLtHandle_t,
        desc: Option<cublasLtMatmulDesc_t>,
        layouts: Vec<cublasLtMatrixLayout_t>,
        pref: Option<cublasLtMatmulPreference_t>,
    }

    impl Drop for Objects {
        fn drop(&mut self) {
            // SAFETY: each object was created once by cuBLASLt and is destroyed once; errors on
            // teardown cannot be acted on.
            unsafe {
                if let Some(p) = self.pref {
                    let _ = lt::destroy_matmul_pref(p);
                }
                for &l in &self.layouts {
                    let _ = lt::destroy_matrix_layout(l);
                }
                if let Some(d) = self.desc {
                    let _ = lt::destroy_matmul_desc(d);
                }
                let _ = lt::destroy_handle(self.handle);
            }
        }
    }

    pub(super) fn measure(
        ctx: &Arc<CudaContext>,
        gpu: u32,
        shape: Gemm,
        dtype: Dtype,
        iters: u32,
        warmup: u32,
    ) -> Result<Timing> {
        let blas = |call: &'static str| {
            move |e: lt::CublasError| Error::Cuda {
                call,
                gpu,
                message: e.to_string(),
            }
        };
        let (m, n, k) = (dim(shape.m)?, dim(shape.n)?, dim(shape.k)?);
        let a_type = if dtype == Dtype::Fp8E5m2 {
            cudaDataType::CUDA_R_8F_E5M2
        } else {
            cudaDataType::CUDA_R_8F_E4M3
        };
        let stream = ctx.new_stream().map_err(cuda("cuStreamCreate", gpu))?;
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent", gpu))?;
        let alloc = |bytes: u64| {
            stream
                .alloc_zeros::<u8>(bytes as usize)
                .map_err(cuda("cuMemAlloc", gpu))
        };
        let a = alloc(shape.k * shape.m)?;
        let b = alloc(shape.k * shape.n)?;
        let mut d = alloc(shape.m * shape.n * 2)?;
        let mut workspace = alloc(WORKSPACE_BYTES as u64)?;
        let mut o = Objects {
            handle: lt::create_handle().map_err(blas("cublasLtCreate"))?,
            desc: None,
            layouts: Vec::new(),
            pref: None,
        };
        let desc = lt::create_matmul_desc(
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cudaDataType::CUDA_R_32F,
        )
        .map_err(blas("cublasLtMatmulDescCreate"))?;
        o.desc = Some(desc);
        let transpose = cublasOperation_t::CUBLAS_OP_T;
        // SAFETY: the attribute buffer is a live cublasOperation_t of the size passed.
        unsafe {
            lt::set_matmul_desc_attribute(
                desc,
                cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                (&transpose as *const cublasOperation_t).cast::<c_void>(),
                std::mem::size_of::<cublasOperation_t>(),
            )
        }
        .map_err(blas("cublasLtMatmulDescSetAttribute"))?;
        let layout = |ty, rows: i32, cols: i32| {
            lt::create_matrix_layout(ty, rows as u64, cols as u64, i64::from(rows))
                .map_err(blas("cublasLtMatrixLayoutCreate"))
        };
        for l in [
            layout(a_type, k, m)?,
            layout(cudaDataType::CUDA_R_8F_E4M3, k, n)?,
            layout(cudaDataType::CUDA_R_16BF, m, n)?,
        ] {
            o.layouts.push(l);
        }
        let (la, lb, lc) = (o.layouts[0], o.layouts[1], o.layouts[2]);
        let pref = lt::create_matmul_pref().map_err(blas("cublasLtMatmulPreferenceCreate"))?;
        o.pref = Some(pref);
        let ws = WORKSPACE_BYTES;
        // SAFETY: the attribute buffer is a live usize of the size passed.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws as *const usize).cast::<c_void>(),
                std::mem::size_of::<usize>(),
            )
        }
        .map_err(blas("cublasLtMatmulPreferenceSetAttribute"))?;
        // SAFETY: every object passed was created above and is still alive.
        let heuristic =
            unsafe { lt::get_matmul_algo_heuristic(o.handle, desc, la, lb, lc, lc, pref) }
                .map_err(blas("cublasLtMatmulAlgoGetHeuristic"))?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _ga) = a.device_ptr(&stream);
        let (pb, _gb) = b.device_ptr(&stream);
        let (pd, _gd) = d.device_ptr_mut(&stream);
        let (pw, _gw) = workspace.device_ptr_mut(&stream);
        let step = || {
            // SAFETY: A (k x m), B (k x n) and D (m x n, bf16) are live buffers on this GPU
            // matching their layouts; C aliases D with beta = 0; the workspace holds `ws` bytes.
            unsafe {
                lt::matmul(
                    o.handle,
                    desc,
                    (&alpha as *const f32).cast::<c_void>(),
                    (&beta as *const f32).cast::<c_void>(),
                    pa as *const c_void,
                    la,
                    pb as *const c_void,
                    lb,
                    pd as *const c_void,
                    lc,
                    pd as *mut c_void,
                    lc,
                    &heuristic.algo,
                    pw as *mut c_void,
                    ws,
                    stream.cu_stream() as _,
                )
            }
            .map_err(blas("cublasLtMatmul"))
        };
        let mut samples =
            time_iterations(&[(gpu, stream.clone())], iters, warmup, Wait::Block, step)?;
        Ok(summarize(&mut samples, Clock::CudaEvent))
    }
}
