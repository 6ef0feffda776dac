//! Checks that the CUDA libraries are loadable before cudarc touches them: cudarc's dynamic
//! loader panics when a library is missing, and microbench must instead say in one line what
//! is missing and exit.

use crate::error::{Error, Result};

/// A library cudarc loads at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// The CUDA driver, `libcuda.so.1`.
    Cuda,
    /// cuBLASLt (every GEMM).
    CublasLt,
    /// NCCL.
    Nccl,
}

impl Library {
    fn present(self) -> bool {
        // SAFETY: each call only tries to dlopen the library under cudarc's candidate names
        // and closes it again; no symbol is called.
        unsafe {
            match self {
                Library::Cuda => cudarc::driver::sys::is_culib_present(),
                Library::CublasLt => cudarc::cublaslt::sys::is_culib_present(),
                Library::Nccl => cudarc::nccl::sys::is_culib_present(),
            }
        }
    }

    fn missing(self) -> Error {
        match self {
            Library::Cuda => Error::NoDriver("libcuda.so.1 cannot be loaded (is the NVIDIA driver installed?)".into()),
            Library::CublasLt => Error::MissingLibrary {
                library: "libcublasLt.so",
                hint: "install the CUDA toolkit or the nvidia-cublas-cu12 wheel and add its lib/ to LD_LIBRARY_PATH",
            },
            Library::Nccl => Error::MissingLibrary {
                library: "libnccl.so",
                hint: "install NCCL or the nvidia-nccl-cu12 wheel, add its lib/ to LD_LIBRARY_PATH \
                       (the wheel ships libnccl.so.2 only: link libnccl.so to it)",
            },
        }
    }
}

/// Fails with the first of `libraries` that cannot be loaded.
pub fn check_libraries(libraries: &[Library]) -> Result<()> {
    match libraries.iter().find(|l| !l.present()) {
        Some(l) => Err(l.missing()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has no NVIDIA driver: the check fails cleanly where cudarc would panic.
    #[test]
    fn missing_driver_is_reported_not_panicked() {
        if Library::Cuda.present() {
            return;
        }
        let err = check_libraries(&[Library::Cuda, Library::Nccl])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "no NVIDIA driver: libcuda.so.1 cannot be loaded (is the NVIDIA driver installed?)"
        );
    }
}
