//! GEMM through cuBLAS (`cublasGemmEx`): bf16, fp16 and tf32 with fp32 accumulation.

use super::summarize;
use super::timer::{cuda, time_iterations};
use crate::error::{Error, Result};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use record::{Clock, Dtype, Gemm, Timing};
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLAS operand and compute types for `dtype`.
fn types(dtype: Dtype, gpu: u32, cc: [u32; 2]) -> Result<(cudaDataType, cublasComputeType_t)> {
    let unsupported = |reason: &str| Error::Unsupported {
        what: format!("{dtype} GEMM"),
        gpu,
        reason: reason.into(),
    };
    match dtype {
        Dtype::Bf16 if cc[0] >= 8 => Ok((
            cudaDataType::CUDA_R_16BF,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )),
        Dtype::Tf32 if cc[0] >= 8 => Ok((
            cudaDataType::CUDA_R_32F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        )),
        Dtype::Bf16 | Dtype::Tf32 => Err(unsupported("needs compute capability 8.0 or later")),
        Dtype::Fp16 => Ok((
            cudaDataType::CUDA_R_16F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )),
        // fp8 needs cuBLASLt with per-tensor scales; microbench does not drive it yet.
        Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Err(unsupported(
            "fp8 GEMM timing through cuBLASLt is not implemented yet",
        )),
        _ => Err(unsupported("expected bf16, fp16 or tf32")),
    }
}

/// Times C = A.B (column-major, no transposes) on one GPU with CUDA events.
pub(super) fn measure(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    cc: [u32; 2],
    shape: Gemm,
    dtype: Dtype,
    iters: u32,
    warmup: u32,
) -> Result<Timing> {
    let (data_type, compute) = types(dtype, gpu, cc)?;
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
    let mut samples = time_iterations(&[(gpu, stream.clone())], iters, warmup, step)?;
    Ok(summarize(&mut samples, Clock::CudaEvent))
}
