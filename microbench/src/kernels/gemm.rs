//! GEMM of every tensor-core type (bf16, fp16, tf32, fp8) through cuBLASLt, as PyTorch and
//! Transformer Engine call it: a workspace of [`WORKSPACE_BYTES`], the first algorithm of
//! `cublasLtMatmulAlgoGetHeuristic`, fp32 accumulation, in the layouts of a training step
//! (see [`crate::plan::gemm_layouts`]), on random operands, timed once the SM clock has
//! settled (issue 10).

use super::cublaslt::{cublaslt, Api};
use super::fill::fill_random;
use super::settle::warm_up;
use super::timer::{cuda, time_iterations, Timed, Wait};
use super::{check_gemm_layout, summarize};
use crate::discovery::SmClock;
use crate::error::{Error, Result};

// cuBLASLt takes cuBLAS's operation enum for TRANSA and TRANSB.
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result::CublasError;
use cudarc::cublaslt::sys::{
    cublasComputeType_t, cublasLtHandle_t, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t,
    cublasLtMatmulDesc_t, cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t,
    cublasLtMatmulPreference_t, cublasLtMatrixLayout_t, cublasStatus_t, cudaDataType,
};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use record::{Clock, Dtype, Gemm, GemmLayout, Timing};
use std::ffi::c_void;
use std::sync::Arc;

/// The workspace cuBLASLt may use: 32 MiB, what PyTorch (`CUBLASLT_WORKSPACE_SIZE` on Hopper)
/// and Transformer Engine give it, so the heuristic may pick the kernels training gets.
const WORKSPACE_BYTES: usize = 32 << 20;

/// Seeds of the A and B operands: different, so B is not A.
const SEEDS: [u64; 2] = [0x9e37_79b9_7f4a_7c15, 0xd1b5_4a32_d192_ed03];

/// How a GEMM's warm-up went, and the clock its timed loop ended at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Warmed {
    /// Iterations spent waiting for the SM clock to settle, after the fixed warm-up.
    pub settle_iterations: u32,
    /// The SM clock and throttle reasons while the timed loop ran.
    pub ended_at: SmClock,
}

/// One operand as cuBLASLt reads it: column-major, `rows x cols`, `ld` elements from one
/// column to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stored {
    rows: u64,
    cols: u64,
    ld: u64,
}

impl Stored {
    /// A packed column-major matrix: the leading dimension is the row count.
    fn packed(rows: u64, cols: u64) -> Stored {
        Stored {
            rows,
            cols,
            ld: rows,
        }
    }

    fn elements(self) -> u64 {
        self.ld * self.cols
    }
}

/// C (m x n) = op(A) (m x k) . op(B) (k x n) in one layout: whether each operand is
/// transposed, and how A, B and C are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Operands {
    transa: bool,
    transb: bool,
    a: Stored,
    b: Stored,
    c: Stored,
}

/// The operands of `shape` in `layout`: a transposed A is stored k x m (ld k), a plain one
/// m x k (ld m); a transposed B n x k (ld n), a plain one k x n (ld k); C is m x n (ld m).
fn operands(shape: Gemm, layout: GemmLayout) -> Operands {
    let Gemm { m, n, k } = shape;
    let (transa, transb) = match layout {
        GemmLayout::Tn => (true, false),
        GemmLayout::Nn => (false, false),
        GemmLayout::Nt => (false, true),
    };
    Operands {
        transa,
        transb,
        a: if transa {
            Stored::packed(k, m)
        } else {
            Stored::packed(m, k)
        },
        b: if transb {
            Stored::packed(n, k)
        } else {
            Stored::packed(k, n)
        },
        c: Stored::packed(m, n),
    }
}

/// Element types of A, B and C (= D), and the compute type, of a GEMM of `dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Types {
    a: Dtype,
    b: Dtype,
    c: Dtype,
    compute: cublasComputeType_t,
}

/// bf16 and fp16 in, same type out, fp32 accumulation (PyTorch's default); tf32 reads and
/// writes fp32 and multiplies in tf32; fp8 writes bf16, as Transformer Engine does, and e5m2
/// (the gradients' type) pairs with an e4m3 B, since cuBLASLt has no e5m2 x e5m2 kernel.
/// `None` for types without tensor-core GEMMs.
fn types(dtype: Dtype) -> Option<Types> {
    let same = |t| Types {
        a: t,
        b: t,
        c: t,
        compute: cublasComputeType_t::CUBLAS_COMPUTE_32F,
    };
    match dtype {
        Dtype::Bf16 | Dtype::Fp16 => Some(same(dtype)),
        Dtype::Tf32 => Some(Types {
            compute: cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            ..same(Dtype::Tf32)
        }),
        Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Some(Types {
            a: dtype,
            b: Dtype::Fp8E4m3,
            c: dtype.gemm_output(),
            compute: cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }),
        _ => None,
    }
}

/// cuBLASLt's name for an element type of [`types`] (tf32 is stored as fp32).
fn cuda_type(dtype: Dtype) -> cudaDataType {
    match dtype {
        Dtype::Bf16 => cudaDataType::CUDA_R_16BF,
        Dtype::Fp16 => cudaDataType::CUDA_R_16F,
        Dtype::Fp8E4m3 => cudaDataType::CUDA_R_8F_E4M3,
        Dtype::Fp8E5m2 => cudaDataType::CUDA_R_8F_E5M2,
        _ => cudaDataType::CUDA_R_32F,
    }
}

/// cuBLASLt's fp8 kernels require every leading dimension to be a multiple of 16 bytes (its
/// fp8 requirements: "pointers and matrix dimension must support 16-byte alignment"); the
/// other types take any, with slower kernels. Refused here by name rather than as the
/// heuristic's bare CUBLAS_STATUS_NOT_SUPPORTED. Device allocations are 256-byte aligned, so
/// the pointers always are.
fn check_alignment(ops: &Operands, types: &Types, gpu: u32) -> Result<()> {
    if types.a.size_bytes() != 1 {
        return Ok(());
    }
    for (name, stored, dtype) in [
        ("lda", ops.a, types.a),
        ("ldb", ops.b, types.b),
        ("ldc", ops.c, types.c),
    ] {
        let bytes = stored.ld * dtype.size_bytes();
        if bytes % 16 != 0 {
            return Err(Error::Unsupported {
                what: format!("{} GEMM with {name} {}", types.a, stored.ld),
                gpu,
                reason: format!(
                    "cuBLASLt's fp8 kernels need leading dimensions of a multiple of 16 bytes; \
                     {} elements of {dtype} are {bytes} bytes",
                    stored.ld
                ),
            });
        }
    }
    Ok(())
}

/// Times C = op(A).op(B) of `shape` in `layout` on one GPU with CUDA events. `clock` reads the
/// GPU's SM clock; the result says how the warm-up went and where the clock ended.
pub(super) fn measure(
    ctx: &Arc<CudaContext>,
    gpu: u32,
    cc: [u32; 2],
    (shape, dtype, layout): (Gemm, Dtype, GemmLayout),
    iterations: (u32, u32),
    clock: &dyn Fn() -> SmClock,
) -> Result<(Timing, Warmed)> {
    let unsupported = |reason: String| Error::Unsupported {
        what: format!("{dtype} GEMM"),
        gpu,
        reason,
    };
    let types = match (dtype.tensor_core_capability(), types(dtype)) {
        (Some(min), _) if cc < min => {
            return Err(unsupported(format!(
                "its tensor cores need compute capability {}.{} or later, this GPU has {}.{}",
                min[0], min[1], cc[0], cc[1]
            )))
        }
        (Some(_), Some(types)) => types,
        _ => {
            return Err(unsupported(
                "expected bf16, fp16, tf32, fp8_e4m3 or fp8_e5m2".into(),
            ))
        }
    };
    check_gemm_layout(dtype, layout, gpu)?;
    let ops = operands(shape, layout);
    check_alignment(&ops, &types, gpu)?;
    let api = cublaslt()?;
    let what = format!(
        "{dtype} {layout} {}x{}x{}, lda {} ldb {} ldc {}",
        shape.m, shape.n, shape.k, ops.a.ld, ops.b.ld, ops.c.ld
    );
    let stream = ctx.new_stream().map_err(cuda("cuStreamCreate", gpu))?;
    ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent", gpu))?;
    let objects = Objects::new(api, gpu, &what, &ops, &types)?;
    let a = operand(&stream, gpu, ops.a, types.a, Some(SEEDS[0]))?;
    let b = operand(&stream, gpu, ops.b, types.b, Some(SEEDS[1]))?;
    let mut d = operand(&stream, gpu, ops.c, types.c, None)?;
    // Allocated once for the whole measurement, as PyTorch keeps one per stream.
    let mut workspace = stream
        .alloc_zeros::<u8>(WORKSPACE_BYTES)
        .map_err(cuda("cuMemAlloc (cuBLASLt workspace)", gpu))?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (pa, _ga) = a.device_ptr(&stream);
    let (pb, _gb) = b.device_ptr(&stream);
    let (pd, _gd) = d.device_ptr_mut(&stream);
    let (pw, _gw) = workspace.device_ptr_mut(&stream);
    let step = || {
        // SAFETY: A, B and D are live buffers on this GPU stored as their layouts say
        // (`operands`); C aliases D with beta = 0; alpha and beta are f32, the scale type of
        // an fp32 compute type; the workspace holds WORKSPACE_BYTES, the most the heuristic
        // was allowed; the algorithm came from the heuristic for these very descriptors.
        unsafe {
            (api.cublasLtMatmul)(
                objects.owned.handle,
                objects.desc,
                (&alpha as *const f32).cast::<c_void>(),
                pa as *const c_void,
                objects.owned.layouts[0],
                pb as *const c_void,
                objects.owned.layouts[1],
                (&beta as *const f32).cast::<c_void>(),
                pd as *const c_void,
                objects.owned.layouts[2],
                pd as *mut c_void,
                objects.owned.layouts[2],
                &objects.algo,
                pw as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as _,
            )
        }
        .result()
        .map_err(blas_err("cublasLtMatmul", gpu, &what))
    };
    time_gemm(&(gpu, stream.clone()), iterations, clock, step)
}

/// Converts a cuBLASLt error into ours, naming the GEMM (`what`) as well as the call.
fn blas_err<'a>(call: &'static str, gpu: u32, what: &'a str) -> impl Fn(CublasError) -> Error + 'a {
    move |e| Error::Cuda {
        call,
        gpu,
        message: format!("{e} ({what})"),
    }
}

/// A device buffer on `stream`'s GPU for `stored` elements of `dtype`: zeroed, or random
/// operands drawn from `seed` (zeros draw less power and read fast, see `fill`).
fn operand(
    stream: &Arc<CudaStream>,
    gpu: u32,
    stored: Stored,
    dtype: Dtype,
    seed: Option<u64>,
) -> Result<CudaSlice<u8>> {
    let bytes = stored
        .elements()
        .checked_mul(dtype.size_bytes())
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::BadValue {
            field: "gemm shape",
            value: format!("{} x {} {dtype}", stored.rows, stored.cols),
            expected: "an operand that fits in memory".into(),
        })?;
    let mut buf = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(cuda("cuMemAlloc", gpu))?;
    if let Some(seed) = seed {
        fill_random(stream, &mut buf, dtype, gpu, seed)?;
    }
    Ok(buf)
}

/// The cuBLASLt objects of one GEMM and the heuristic's algorithm for them.
struct Objects {
    /// Handle, descriptor, layouts (A, B, then C, which is also D's) and preference.
    owned: Owned,
    /// The operation descriptor (types, transposes), also in `owned`.
    desc: cublasLtMatmulDesc_t,
    algo: cublasLtMatmulAlgo_t,
}

/// The object a cuBLASLt `create(&mut out, ...)` call makes, or the call's error.
fn made<T>(
    create: impl FnOnce(*mut T) -> cublasStatus_t,
    err: impl Fn(CublasError) -> Error,
) -> Result<T> {
    let mut out = std::mem::MaybeUninit::<T>::uninit();
    create(out.as_mut_ptr()).result().map_err(err)?;
    // SAFETY: cuBLASLt wrote the object when it returned success.
    Ok(unsafe { out.assume_init() })
}

impl Objects {
    fn new(
        api: &'static Api,
        gpu: u32,
        what: &str,
        ops: &Operands,
        types: &Types,
    ) -> Result<Objects> {
        let err = |call| blas_err(call, gpu, what);
        // SAFETY (every create below): the out pointer is a valid place for one object.
        // Each object goes into `owned` as soon as it exists, so an error on the way frees
        // the ones made before it.
        let mut owned = Owned {
            api,
            handle: made(
                |h| unsafe { (api.cublasLtCreate)(h) },
                err("cublasLtCreate"),
            )?,
            desc: None,
            layouts: Vec::with_capacity(3),
            pref: None,
        };
        let desc = made(
            |d| unsafe {
                (api.cublasLtMatmulDescCreate)(d, types.compute, cudaDataType::CUDA_R_32F)
            },
            err("cublasLtMatmulDescCreate"),
        )?;
        owned.desc = Some(desc);
        let op = |t: bool| {
            if t {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            }
        };
        for (attribute, value) in [
            (
                cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                op(ops.transa),
            ),
            (
                cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                op(ops.transb),
            ),
        ] {
            // SAFETY: `desc` is live and the buffer is a cublasOperation_t of the size passed.
            unsafe {
                (api.cublasLtMatmulDescSetAttribute)(
                    desc,
                    attribute,
                    (&value as *const cublasOperation_t).cast::<c_void>(),
                    std::mem::size_of::<cublasOperation_t>(),
                )
            }
            .result()
            .map_err(err("cublasLtMatmulDescSetAttribute"))?;
        }
        for (stored, dtype) in [(ops.a, types.a), (ops.b, types.b), (ops.c, types.c)] {
            let ld = i64::try_from(stored.ld).map_err(|_| Error::BadValue {
                field: "gemm shape",
                value: stored.ld.to_string(),
                expected: "a leading dimension of at most 2^63-1".into(),
            })?;
            owned.layouts.push(made(
                |l| unsafe {
                    (api.cublasLtMatrixLayoutCreate)(
                        l,
                        cuda_type(dtype),
                        stored.rows,
                        stored.cols,
                        ld,
                    )
                },
                err("cublasLtMatrixLayoutCreate"),
            )?);
        }
        let pref = made(
            |p| unsafe { (api.cublasLtMatmulPreferenceCreate)(p) },
            err("cublasLtMatmulPreferenceCreate"),
        )?;
        owned.pref = Some(pref);
        let ws = WORKSPACE_BYTES;
        // SAFETY: `pref` is live and the buffer is a usize of the size passed.
        unsafe {
            (api.cublasLtMatmulPreferenceSetAttribute)(
                pref,
                cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws as *const usize).cast::<c_void>(),
                std::mem::size_of::<usize>(),
            )
        }
        .result()
        .map_err(err("cublasLtMatmulPreferenceSetAttribute"))?;
        let (la, lb, lc) = (owned.layouts[0], owned.layouts[1], owned.layouts[2]);
        let mut heuristic = std::mem::MaybeUninit::<cublasLtMatmulHeuristicResult_t>::zeroed();
        let mut found: std::ffi::c_int = 0;
        // SAFETY: every object passed was created above and is alive; one result is asked
        // for and `heuristic` has room for it, `found` for the count.
        unsafe {
            (api.cublasLtMatmulAlgoGetHeuristic)(
                owned.handle,
                desc,
                la,
                lb,
                lc,
                lc,
                pref,
                1,
                heuristic.as_mut_ptr(),
                &mut found,
            )
        }
        .result()
        .map_err(err("cublasLtMatmulAlgoGetHeuristic"))?;
        // No algorithm for these descriptors is reported as cuBLAS would for the call.
        if found == 0 {
            return Err(err("cublasLtMatmulAlgoGetHeuristic")(CublasError(
                cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED,
            )));
        }
        // SAFETY: cuBLASLt wrote one result (found is 1).
        let heuristic = unsafe { heuristic.assume_init() };
        Ok(Objects {
            owned,
            desc,
            algo: heuristic.algo,
        })
    }
}

/// cuBLASLt objects created so far, destroyed when dropped.
struct Owned {
    api: &'static Api,
    handle: cublasLtHandle_t,
    desc: Option<cublasLtMatmulDesc_t>,
    layouts: Vec<cublasLtMatrixLayout_t>,
    pref: Option<cublasLtMatmulPreference_t>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: each object was created once by cuBLASLt, is destroyed once, and the GEMM
        // using them is over (its stream synchronised); errors on teardown cannot be acted on.
        let api = self.api;
        unsafe {
            if let Some(p) = self.pref {
                (api.cublasLtMatmulPreferenceDestroy)(p);
            }
            for &l in &self.layouts {
                (api.cublasLtMatrixLayoutDestroy)(l);
            }
            if let Some(d) = self.desc {
                (api.cublasLtMatmulDescDestroy)(d);
            }
            (api.cublasLtDestroy)(self.handle);
        }
    }
}

/// Runs `step` `warmup` times, then until the SM clock settles (see [`warm_up`]), then times
/// `iters` iterations, reading the clock while they run; gives the timing and how the warm-up
/// went.
fn time_gemm<S: Timed>(
    stream: &S,
    (iters, warmup): (u32, u32),
    clock: &dyn Fn() -> SmClock,
    mut step: impl FnMut() -> Result<()>,
) -> Result<(Timing, Warmed)> {
    for _ in 0..warmup {
        step()?;
    }
    let settle = warm_up(&mut step, &|| clock().mhz, &|| stream.synchronize())?;
    let during = std::cell::Cell::new(SmClock::default());
    let sample = || during.set(clock());
    let mut samples = time_iterations(
        std::slice::from_ref(stream),
        iters,
        0,
        Wait::Block(&sample),
        &mut step,
    )?;
    let warmed = Warmed {
        settle_iterations: settle.iterations(),
        ended_at: during.get(),
    };
    Ok((summarize(&mut samples, Clock::CudaEvent), warmed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A non-square GEMM, m = 4096, n = 1024, k = 512, as cuBLAS (column-major) stores it in
    /// each layout. C is 4096 x 1024 (ldc 4096) throughout.
    #[test]
    fn leading_dimensions_follow_each_transpose() {
        let shape = Gemm {
            m: 4096,
            n: 1024,
            k: 512,
        };
        let c = Stored {
            rows: 4096,
            cols: 1024,
            ld: 4096,
        };
        // tn (forward): A stored k x m = 512 x 4096 (lda 512), B k x n = 512 x 1024 (ldb 512).
        assert_eq!(
            operands(shape, GemmLayout::Tn),
            Operands {
                transa: true,
                transb: false,
                a: Stored {
                    rows: 512,
                    cols: 4096,
                    ld: 512
                },
                b: Stored {
                    rows: 512,
                    cols: 1024,
                    ld: 512
                },
                c,
            }
        );
        // nn (input gradient): A m x k = 4096 x 512 (lda 4096), B 512 x 1024 (ldb 512).
        assert_eq!(
            operands(shape, GemmLayout::Nn),
            Operands {
                transa: false,
                transb: false,
                a: Stored {
                    rows: 4096,
                    cols: 512,
                    ld: 4096
                },
                b: Stored {
                    rows: 512,
                    cols: 1024,
                    ld: 512
                },
                c,
            }
        );
        // nt (weight gradient): A 4096 x 512 (lda 4096), B stored n x k = 1024 x 512 (ldb 1024).
        assert_eq!(
            operands(shape, GemmLayout::Nt),
            Operands {
                transa: false,
                transb: true,
                a: Stored {
                    rows: 4096,
                    cols: 512,
                    ld: 4096
                },
                b: Stored {
                    rows: 1024,
                    cols: 512,
                    ld: 1024
                },
                c,
            }
        );
        // Every layout stores the same elements: 4096*512 + 512*1024 + 4096*1024.
        for layout in [GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt] {
            let o = operands(shape, layout);
            assert_eq!(
                o.a.elements() + o.b.elements() + o.c.elements(),
                shape.elements()
            );
        }
    }

    #[test]
    fn fp8_writes_bf16_and_pairs_e5m2_with_e4m3() {
        let e5m2 = types(Dtype::Fp8E5m2).unwrap();
        assert_eq!(
            (e5m2.a, e5m2.b, e5m2.c),
            (Dtype::Fp8E5m2, Dtype::Fp8E4m3, Dtype::Bf16)
        );
        let tf32 = types(Dtype::Tf32).unwrap();
        assert_eq!(
            tf32.compute,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        );
        assert_eq!(cuda_type(tf32.a), cudaDataType::CUDA_R_32F);
        assert!(types(Dtype::Fp64).is_none());
    }

    /// fp8 needs 16-byte leading dimensions: k = 8 gives lda 8 bytes in tn; bf16 takes it.
    #[test]
    fn fp8_leading_dimensions_must_be_16_byte_multiples() {
        let shape = Gemm { m: 64, n: 64, k: 8 };
        let ops = operands(shape, GemmLayout::Tn);
        let err = check_alignment(&ops, &types(Dtype::Fp8E4m3).unwrap(), 2)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "fp8_e4m3 GEMM with lda 8 is not supported on GPU 2 (cuBLASLt's fp8 kernels need \
             leading dimensions of a multiple of 16 bytes; 8 elements of fp8_e4m3 are 8 bytes)"
        );
        assert!(check_alignment(&ops, &types(Dtype::Bf16).unwrap(), 2).is_ok());
        let aligned = operands(
            Gemm {
                m: 64,
                n: 64,
                k: 16,
            },
            GemmLayout::Tn,
        );
        assert!(check_alignment(&aligned, &types(Dtype::Fp8E4m3).unwrap(), 2).is_ok());
    }

    /// The clock a GEMM's record carries (`ended_at`) is the one read after its timed
    /// iterations are enqueued and before its stream is synchronized, while they run, not
    /// one read on the idle GPU after the wait (issue 29, item 6). The fake clock holds at
    /// 1755 MHz, so the warm-up settles after its 200 ms, and counts its readings in the
    /// throttle reasons, so the record's reading can be told from the others.
    #[test]
    fn a_gemm_records_the_clock_read_while_its_timed_iterations_run() {
        use super::super::timer::fake;
        let log = RefCell::new(Vec::new());
        let stream = fake::Stream { gpu: 3, log: &log };
        let readings = Cell::new(0u64);
        let clock = || {
            readings.set(readings.get() + 1);
            log.borrow_mut().push(("clock", 0));
            SmClock {
                mhz: Some(1755),
                throttle_reasons: Some(readings.get()),
            }
        };
        // Back-to-back steps are logged as one, as the warm-up runs thousands.
        let step = || {
            let mut log = log.borrow_mut();
            if log.last() != Some(&("step", 0)) {
                log.push(("step", 0));
            }
            Ok(())
        };
        let (timing, warmed) = time_gemm(&stream, (3, 2), &clock, step).unwrap();
        assert_eq!(timing.time_s, 1e-3);
        let log = log.into_inner();
        let timed = [
            ("record", 3),
            ("step", 0),
            ("record", 3),
            ("record", 3),
            ("step", 0),
            ("record", 3),
            ("record", 3),
            ("step", 0),
            ("record", 3),
            ("clock", 0),
            ("sync", 3),
        ];
        assert!(log.ends_with(&timed), "{:?}", &log[log.len() - 12..]);
        assert_eq!(warmed.ended_at.throttle_reasons, Some(readings.get()));
        // The warm-up read the clock while its rounds ran too (settle.rs), and waited.
        assert!(log.contains(&("sync", 3)) && log.len() > timed.len());
    }
}
