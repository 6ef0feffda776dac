//! GEMM: bf16, fp16 and tf32 through cuBLAS (`cublasGemmEx`), fp8 through cuBLASLt (which
//! alone takes fp8 operands), all with fp32 accumulation, on random operands, timed once the
//! SM clock has settled (issue 10).

use super::fill::fill_random;
use super::loader::{check_libraries, Library};
use super::settle::Settle;
use super::summarize;
use super::timer::{cuda, time_iterations, Wait};
use crate::discovery::SmClock;
use crate::error::{Error, Result};
use crate::plan::tensor_core_capability;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use record::{Clock, Dtype, Gemm, Timing};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// How a GEMM's warm-up went, and the clock its timed loop ended at: for the log, since the
/// record has no field for them (design.md).
#[derive(Debug, Clone, Copy)]
pub(super) struct Warmed {
    /// Iterations spent waiting for the SM clock to settle, after the fixed warm-up.
    pub settle_iterations: u32,
    /// The SM clock and throttle reasons once the timed loop was done.
    pub ended_at: SmClock,
}

impl std::fmt::Display for Warmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} warm-up iterations until the SM clock settled; after the timed loop {}",
            self.settle_iterations, self.ended_at
        )
    }
}

/// Seeds of the A and B operands: different, so B is not A.
const SEEDS: [u64; 2] = [0x9e37_79b9_7f4a_7c15, 0xd1b5_4a32_d192_ed03];

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
/// `clock` reads the GPU's SM clock; the result says how the warm-up went.
pub(super) fn measure(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    cc: [u32; 2],
    shape: Gemm,
    dtype: Dtype,
    (iters, warmup): (u32, u32),
    clock: &dyn Fn() -> SmClock,
) -> Result<(Timing, Warmed)> {
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
            measure_gemm_ex(ctx, gpu, shape, types, dtype, (iters, warmup), clock)
        }

        None => {
            check_libraries(&[Library::CublasLt])?;
            lt::measure(ctx, gpu, shape, dtype, (iters, warmup), clock)
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

/// A device buffer of `bytes` on `stream`'s GPU, zeroed, or with random operands of `dtype`
/// drawn from `seed`.
fn operand(
    stream: &Arc<CudaStream>,
    gpu: u32,
    bytes: u64,
    random: Option<(Dtype, u64)>,
) -> Result<CudaSlice<u8>> {
    let mut buf = stream
        .alloc_zeros::<u8>(bytes as usize)
        .map_err(cuda("cuMemAlloc", gpu))?;
    if let Some((dtype, seed)) = random {
        fill_random(stream, &mut buf, dtype, gpu, seed)?;
    }
    Ok(buf)
}

/// Runs `step` `warmup` times, then until the SM clock settles (see [`Settle`]), then times
/// `iters` iterations; gives the timing and how the warm-up went.
fn time_gemm(
    stream: &Arc<CudaStream>,
    gpu: u32,
    (iters, warmup): (u32, u32),
    clock: &dyn Fn() -> SmClock,
    mut step: impl FnMut() -> Result<()>,
) -> Result<(Timing, Warmed)> {
    for _ in 0..warmup {
        step()?;
    }
    let (mut settle, began) = (Settle::default(), Instant::now());
    loop {
        step()?;
        // The clock is read with the GEMM done, so it shows the clock under this load.
        stream
            .synchronize()
            .map_err(cuda("cuStreamSynchronize", gpu))?;
        if settle.settled(clock().mhz, began.elapsed()) {
            break;
        }
    }
    let mut samples = time_iterations(&[(gpu, stream.clone())], iters, 0, Wait::Block, step)?;
    let warmed = Warmed {
        settle_iterations: settle.iterations(),
        ended_at: clock(),
    };
    Ok((summarize(&mut samples, Clock::CudaEvent), warmed))
}

/// C = A.B (column-major, no transposes) through cublasGemmEx.
fn measure_gemm_ex(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    shape: Gemm,
    (data_type, compute): (cudaDataType, cublasComputeType_t),
    dtype: Dtype,
    iterations: (u32, u32),
    clock: &dyn Fn() -> SmClock,
) -> Result<(Timing, Warmed)> {
    let (m, n, k) = (dim(shape.m)?, dim(shape.n)?, dim(shape.k)?);
    let stream = ctx.new_stream().map_err(cuda("cuStreamCreate", gpu))?;
    let es = dtype.size_bytes();
    let a = operand(
        &stream,
        gpu,
        shape.m * shape.k * es,
        Some((dtype, SEEDS[0])),
    )?;
    let b = operand(
        &stream,
        gpu,
        shape.k * shape.n * es,
        Some((dtype, SEEDS[1])),
    )?;
    let mut c = operand(&stream, gpu, shape.m * shape.n * es, None)?;
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
    time_gemm(&stream, gpu, iterations, clock, step)
}

/// fp8 GEMM through cuBLASLt. FP8 kernels want A transposed ("TN": A stored k x m) and take a
/// bf16 C/D; e5m2 pairs with an e4m3 B, since cuBLASLt has no e5m2 x e5m2 kernel. Scales are
/// left unset, which cuBLASLt reads as 1.
mod lt {
    use super::super::timer::cuda;
    use super::{dim, operand, time_gemm, Warmed, SEEDS};
    use crate::discovery::SmClock;
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
    use record::{Dtype, Gemm, Timing};
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
        iterations: (u32, u32),
        clock: &dyn Fn() -> SmClock,
    ) -> Result<(Timing, Warmed)> {
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
        // A is e4m3 or e5m2, B e4m3 (see above); one byte each.
        let a = operand(&stream, gpu, shape.k * shape.m, Some((dtype, SEEDS[0])))?;
        let b = operand(
            &stream,
            gpu,
            shape.k * shape.n,
            Some((Dtype::Fp8E4m3, SEEDS[1])),
        )?;
        let mut d = operand(&stream, gpu, shape.m * shape.n * 2, None)?;
        let mut workspace = operand(&stream, gpu, WORKSPACE_BYTES as u64, None)?;
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
        time_gemm(&stream, gpu, iterations, clock, step)
    }
}
