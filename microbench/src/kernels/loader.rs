//! The GPU libraries, opened and checked once before any GPU work. cudarc 0.19 looks each up
//! under a fixed list of names built for one CUDA major (`cuda-12040`: no `libnccl.so.2`, no
//! `libcublasLt.so.13`) and resolves each symbol at its first call, panicking when it is
//! missing. So microbench opens the files itself under the names NVIDIA's packages and wheels
//! ship, resolves every symbol it calls at once, and calls NCCL and cuBLASLt through its own
//! tables ([`super::nccl`], [`super::cublaslt`]); the driver stays cudarc's, checked here first.

use crate::error::{Error, Result};
use std::ffi::{c_int, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A library microbench loads at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Library {
    /// NVML, `libnvidia-ml.so.1` (discovery and live counters).
    Nvml,
    /// The CUDA driver, `libcuda.so.1`.
    Cuda,
    /// cuBLASLt (every GEMM).
    CublasLt,
    /// NCCL (every collective).
    Nccl,
}

/// The symbols of the CUDA driver that cudarc calls for microbench: contexts, streams, events,
/// allocations, copies and peer access. cudarc resolves them lazily; checking them up front
/// turns its panic at first use into one error before any GPU work.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxEnablePeerAccess",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventElapsedTime",
    "cuEventDestroy_v2",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8Async",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyPeerAsync",
    "cuMemHostAlloc",
    "cuMemFreeHost",
];

/// The NVML symbols microbench calls itself (`discovery::nvml_raw`) and the ones every
/// discovery starts with; nvml-wrapper reports its own missing ones as errors, not panics.
const NVML_SYMBOLS: &[&str] = &[
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetFieldValues",
];

impl Library {
    /// Every library, in the order `microbench libs` reports them.
    pub const ALL: [Library; 4] = [
        Library::Nvml,
        Library::Cuda,
        Library::CublasLt,
        Library::Nccl,
    ];

    /// What the library is, for people.
    pub fn title(self) -> &'static str {
        match self {
            Library::Nvml => "NVML",
            Library::Cuda => "CUDA driver",
            Library::CublasLt => "cuBLASLt",
            Library::Nccl => "NCCL",
        }
    }

    /// The file names tried, in order, on the dynamic loader's search path: the versioned
    /// names NVIDIA's driver, CUDA packages and pip wheels ship first (the wheels ship only
    /// those), then the unversioned development link. cuBLASLt 13 (CUDA 13) before 12.
    pub fn file_names(self) -> &'static [&'static str] {
        match self {
            Library::Nvml => &["libnvidia-ml.so.1", "libnvidia-ml.so"],
            Library::Cuda => &["libcuda.so.1", "libcuda.so"],
            Library::CublasLt => &["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"],
            Library::Nccl => &["libnccl.so.2", "libnccl.so"],
        }
    }

    /// Every symbol of the library that microbench calls.
    pub fn symbols(self) -> &'static [&'static str] {
        match self {
            Library::Nvml => NVML_SYMBOLS,
            Library::Cuda => DRIVER_SYMBOLS,
            Library::CublasLt => super::cublaslt::Api::SYMBOLS,
            Library::Nccl => super::nccl::Api::SYMBOLS,
        }
    }

    /// Where the library usually comes from, and what version its symbols need.
    fn hint(self) -> &'static str {
        match self {
            Library::Nvml | Library::Cuda => "is the NVIDIA driver installed?",
            Library::CublasLt => {
                "install the CUDA toolkit, or the nvidia-cublas-cu12 wheel (or CUDA 13's \
                 nvidia-cublas) and add its nvidia/cublas/lib to LD_LIBRARY_PATH"
            }
            Library::Nccl => {
                "install NCCL 2.18 or later, or the nvidia-nccl-cu12 wheel and add its \
                 nvidia/nccl/lib to LD_LIBRARY_PATH"
            }
        }
    }

    fn slot(self) -> &'static OnceLock<Result<Opened, Unloadable>> {
        static SLOTS: [OnceLock<Result<Opened, Unloadable>>; 4] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        &SLOTS[self as usize]
    }
}

/// Why a library cannot be used, kept once per process and given as an [`Error`] at each use.
#[derive(Debug, Clone)]
pub(crate) enum Unloadable {
    /// The driver's libraries (NVML, libcuda) do not load.
    NoDriver(String),
    /// A CUDA library does not load under any name.
    NotFound {
        library: &'static str,
        tried: String,
        hint: &'static str,
    },
    /// A file loaded but lacks symbols microbench calls.
    Symbols {
        file: String,
        symbols: String,
        hint: &'static str,
    },
}

impl From<Unloadable> for Error {
    fn from(u: Unloadable) -> Error {
        match u {
            Unloadable::NoDriver(why) => Error::NoDriver(why),
            Unloadable::NotFound {
                library,
                tried,
                hint,
            } => Error::MissingLibrary {
                library,
                tried,
                hint,
            },
            Unloadable::Symbols {
                file,
                symbols,
                hint,
            } => Error::MissingSymbols {
                file,
                symbols,
                hint,
            },
        }
    }
}

/// A library file that loaded and has every symbol microbench calls. It stays loaded for
/// the life of the process: the symbol tables point into it.
#[derive(Debug)]
pub struct Opened {
    /// The library.
    pub library: Library,
    /// The name it loaded under, one of [`Library::file_names`] (or the path given).
    pub name: String,
    /// The file the dynamic loader picked for that name.
    pub path: Option<PathBuf>,
    lib: libloading::Library,
}

/// Opens `library` under the first of `names` that loads: a name or a path. The error names
/// every name tried and why the last one failed.
pub(crate) fn open_first(library: Library, names: &[&str]) -> Result<Opened, Unloadable> {
    let mut why = String::new();
    for &name in names {
        // SAFETY: loading runs the library's initialisers; these are NVIDIA's libraries (or a
        // file the user put first on the search path), loaded as cudarc would load them.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => {
                let (lib, path) = loaded_path(lib);
                return Ok(Opened {
                    library,
                    name: name.to_string(),
                    path,
                    lib,
                });
            }
            // libloading's own text is "dlopen failed"; dlerror's, its source, says why.
            Err(e) => {
                why = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string())
            }
        }
    }
    let tried = names.join(", ");
    let error = format!("tried {tried} on the library search path (last: {why})");
    Err(match library {
        Library::Nvml | Library::Cuda => Unloadable::NoDriver(format!(
            "{} cannot be loaded (tried {tried}; {})",
            names.first().copied().unwrap_or_default(),
            library.hint()
        )),
        _ => Unloadable::NotFound {
            library: library.title(),
            tried: error,
            hint: library.hint(),
        },
    })
}

/// The head of glibc's public `struct link_map` (link.h): the load address, then the path.
#[repr(C)]
struct LinkMapHead {
    l_addr: usize,
    l_name: *const std::ffi::c_char,
}

/// The file the dynamic loader picked for `lib` (`dlinfo`'s link map); `None` where it
/// does not say.
fn loaded_path(lib: libloading::Library) -> (libloading::Library, Option<PathBuf>) {
    let handle = libloading::os::unix::Library::from(lib).into_raw();
    let mut map: *const LinkMapHead = std::ptr::null();
    // SAFETY: `handle` is a live dlopen handle and `map` a valid place for the link map's
    // address, which RTLD_DI_LINKMAP writes.
    let found = unsafe { libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, (&raw mut map).cast()) };
    // SAFETY: when dlinfo succeeded, `map` points at the loader's entry for the library,
    // alive while the handle is, and l_name is NUL-terminated.
    let path = (found == 0 && !map.is_null())
        .then(|| unsafe { (*map).l_name })
        .filter(|name| !name.is_null())
        .map(|name| {
            PathBuf::from(
                unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned(),
            )
        })
        .filter(|p| !p.as_os_str().is_empty());
    // SAFETY: `handle` came from `into_raw` above and is given back once.
    let lib = unsafe { libloading::os::unix::Library::from_raw(handle) };
    (lib.into(), path)
}

impl Opened {
    /// The symbols of [`Library::symbols`] this file lacks.
    pub fn missing(&self) -> Vec<&'static str> {
        self.library
            .symbols()
            .iter()
            .copied()
            .filter(|name| {
                // SAFETY: only looked up, never called.
                unsafe { self.lib.get::<*const std::ffi::c_void>(name.as_bytes()) }.is_err()
            })
            .collect()
    }

    /// The file as a person reads it: `libnccl.so.2 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)`.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("{} ({})", self.name, p.display()),
            None => self.name.clone(),
        }
    }

    /// The loaded library, for resolving its symbol table.
    pub(crate) fn handle(&self) -> &libloading::Library {
        &self.lib
    }

    /// Fails, naming every missing symbol and the file, when the file lacks any.
    fn complete(self) -> Result<Opened, Unloadable> {
        let missing = self.missing();
        if missing.is_empty() {
            return Ok(self);
        }
        Err(Unloadable::Symbols {
            file: self.describe(),
            symbols: missing.join(", "),
            hint: self.library.hint(),
        })
    }
}

/// `library`, opened under its first name that loads and checked for every symbol microbench
/// calls, once per process.
pub(crate) fn opened(library: Library) -> Result<&'static Opened> {
    load(library).map_err(|e| e.clone().into())
}

fn load(library: Library) -> Result<&'static Opened, &'static Unloadable> {
    library
        .slot()
        .get_or_init(|| open_first(library, library.file_names()).and_then(Opened::complete))
        .as_ref()
}

/// Fails with the first of `libraries` that cannot be loaded or lacks a symbol microbench
/// calls.
pub fn check_libraries(libraries: &[Library]) -> Result<()> {
    libraries.iter().try_for_each(|&l| opened(l).map(|_| ()))
}

/// A version the libraries encode as `major * 10000 + minor * 100 + patch` (NCCL 2.9 and
/// later, cuBLASLt), as `2.27.3`.
pub(crate) fn dotted(v: u64) -> String {
    format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
}

/// The CUDA driver API version of a loaded driver, `13.0` (`cuDriverGetVersion`, which
/// needs no GPU and no `cuInit`); `None` when the call fails.
pub(crate) fn driver_version(driver: &Opened) -> Option<String> {
    // SAFETY: cuDriverGetVersion(int*) has this signature in every CUDA release.
    let get = unsafe {
        driver
            .lib
            .get::<unsafe extern "C" fn(*mut c_int) -> c_int>(b"cuDriverGetVersion\0")
    }
    .ok()?;
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid place for the version.
    (unsafe { get(&mut v) } == 0 && v > 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// A table of C functions resolved from a library at once: a struct with one field per
/// symbol (named as the symbol), its `SYMBOLS`, and `resolve`, which gives the table or the
/// names it lacks.
macro_rules! api {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $($symbol:ident: fn($($arg:ty),*) -> $ret:ty;)*
    }) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        $vis struct $name {
            $($vis $symbol: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        #[allow(non_snake_case)]
        impl $name {
            /// Every symbol of the table, as the library exports it.
            pub const SYMBOLS: &'static [&'static str] = &[$(stringify!($symbol)),*];

            /// The table from `lib`, or the symbols it lacks.
            $vis fn resolve(
                lib: &libloading::Library,
            ) -> std::result::Result<$name, Vec<&'static str>> {
                let mut missing = Vec::new();
                $(
                    // SAFETY: the type is the symbol's C signature, as NVIDIA's header
                    // declares it (cudarc's bindings).
                    let $symbol = unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(
                            concat!(stringify!($symbol), "\0").as_bytes(),
                        )
                    }
                    .map(|s| *s)
                    .map_err(|_| missing.push(stringify!($symbol)))
                    .ok();
                )*
                match ($($symbol,)*) {
                    ($(Some($symbol),)*) => Ok($name { $($symbol),* }),
                    _ => Err(missing),
                }
            }
        }
    };
}
pub(crate) use api;

/// The symbol table `A` of `library`, resolved once per process into `slot`.
pub(crate) fn table<A: Send + Sync>(
    library: Library,
    slot: &'static OnceLock<Result<A, Unloadable>>,
    resolve: fn(&libloading::Library) -> std::result::Result<A, Vec<&'static str>>,
) -> Result<&'static A> {
    slot.get_or_init(|| {
        let file = load(library).map_err(Unloadable::clone)?;
        resolve(file.handle()).map_err(|missing| Unloadable::Symbols {
            file: file.describe(),
            symbols: missing.join(", "),
            hint: library.hint(),
        })
    })
    .as_ref()
    .map_err(|e| e.clone().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has no NVIDIA driver: the check fails cleanly where cudarc would panic.
    #[test]
    fn missing_driver_is_reported_not_panicked() {
        if opened(Library::Cuda).is_ok() {
            return;
        }
        let err = check_libraries(&[Library::Cuda, Library::Nccl])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "no NVIDIA driver: libcuda.so.1 cannot be loaded (tried libcuda.so.1, libcuda.so; \
             is the NVIDIA driver installed?)"
        );
    }

    /// The names NVIDIA's wheels and packages ship are tried, versioned first: the NCCL
    /// wheel has only libnccl.so.2 and CUDA 13's cuBLASLt is libcublasLt.so.13, neither of
    /// which cudarc's own list for CUDA 12 has.
    #[test]
    fn versioned_names_come_first() {
        assert_eq!(Library::Nccl.file_names()[0], "libnccl.so.2");
        assert_eq!(
            &Library::CublasLt.file_names()[..2],
            ["libcublasLt.so.13", "libcublasLt.so.12"]
        );
        assert_eq!(Library::Cuda.file_names()[0], "libcuda.so.1");
        assert_eq!(Library::Nvml.file_names()[0], "libnvidia-ml.so.1");
    }

    /// When nothing loads, the error names every name tried.
    #[test]
    fn a_library_that_does_not_load_names_what_was_tried() {
        let err = Error::from(
            open_first(
                Library::Nccl,
                &["libmeshfit-none.so.2", "libmeshfit-none.so"],
            )
            .unwrap_err(),
        )
        .to_string();
        assert!(
            err.starts_with(
                "NCCL not found: tried libmeshfit-none.so.2, libmeshfit-none.so on the library \
                 search path (last: "
            ),
            "{err}"
        );
        assert!(
            err.ends_with("add its nvidia/nccl/lib to LD_LIBRARY_PATH"),
            "{err}"
        );
    }

    /// A file that loads but lacks what microbench calls (here the C library standing in for
    /// NCCL) is refused in one line naming the file and every missing symbol, where cudarc
    /// would panic at the first call.
    #[test]
    fn a_library_without_the_symbols_names_each_missing_one_and_the_file() {
        let file = open_first(Library::Nccl, &["libc.so.6"]).unwrap();
        let missing = file.missing();
        assert_eq!(missing, Library::Nccl.symbols());
        assert!(missing.contains(&"ncclCommSplit"));
        let path = file.path.clone().expect("dladdr finds libc's file");
        assert!(path.to_string_lossy().contains("libc"), "{path:?}");
        let err = Error::from(file.complete().unwrap_err()).to_string();
        assert!(
            err.starts_with(&format!(
                "libc.so.6 ({}) lacks ncclGetVersion, ncclGetUniqueId,",
                path.display()
            )),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
    }

    #[test]
    fn versions_read_as_the_libraries_encode_them() {
        assert_eq!(dotted(22703), "2.27.3");
        assert_eq!(dotted(120903), "12.9.3");
    }
}
