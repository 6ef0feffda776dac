//! Stand-ins for the NVIDIA driver's libraries, built with the C compiler for tests on a
//! machine without a GPU: a `libcuda.so.1` whose every function returns
//! CUDA_ERROR_NO_DEVICE, and a `libnvidia-ml.so.1` that reports one idle H100, as NVML does
//! where the driver sees a GPU that CUDA cannot use (a container not given the device nodes,
//! `CUDA_VISIBLE_DEVICES` empty). Shared by microbench's tests (included by path) and the
//! end-to-end ones.

use std::path::Path;

/// CUDA_ERROR_NO_DEVICE in cuda.h.
pub const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// NVML for one idle GPU: init, the device count and handle, and what discovery and the
/// idle check read (PCI info, name, UUID, memory, compute capability, utilisation, no
/// processes). Every other NVML function is absent, which nvml-wrapper reports as an error
/// for that reading alone.
const NVML: &str = r#"
#include <string.h>
typedef struct { char legacy[16]; unsigned domain, bus, device, id, subsystem; char bus_id[32]; } pci_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } memory_t;
typedef struct { unsigned gpu, memory; } utilization_t;
static int the_gpu;
int nvmlInit_v2(void) { return 0; }
int nvmlInitWithFlags(unsigned flags) { (void)flags; return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { if (i) return 2; *d = &the_gpu; return 0; }
int nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
  (void)d; memset(p, 0, sizeof *p); p->bus = 0x18;
  strcpy(p->legacy, "0000:18:00.0"); strcpy(p->bus_id, "00000000:18:00.0"); return 0; }
int nvmlDeviceGetName(void *d, char *s, unsigned n) { (void)d; strncpy(s, "NVIDIA H100 80GB HBM3", n); return 0; }
int nvmlDeviceGetUUID(void *d, char *s, unsigned n) { (void)d; strncpy(s, "GPU-00000000-0000-0000-0000-000000000001", n); return 0; }
int nvmlDeviceGetMemoryInfo_v2(void *d, memory_t *m) {
  (void)d; m->total = 85899345920ULL; m->reserved = 0; m->used = 0; m->free = m->total; return 0; }
int nvmlDeviceGetCudaComputeCapability(void *d, int *major, int *minor) { (void)d; *major = 9; *minor = 0; return 0; }
int nvmlDeviceGetUtilizationRates(void *d, utilization_t *u) { (void)d; u->gpu = 0; u->memory = 0; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, void *p) { (void)d; (void)p; *n = 0; return 0; }
"#;

/// Builds `source` into `dir/soname` as a shared library; false where no C compiler runs.
fn build(dir: &Path, soname: &str, source: &str) -> bool {
    let c = dir.join(format!("{soname}.c"));
    std::fs::write(&c, source).expect("writing a stub's source");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(dir.join(soname))
        .arg(&c)
        .status();
    matches!(built, Ok(s) if s.success())
}

/// `dir/libcuda.so.1` exporting `symbols` (the driver functions microbench calls, as
/// `microbench libs` lists them), each returning CUDA_ERROR_NO_DEVICE.
pub fn driver(dir: &Path, symbols: &[&str]) -> bool {
    let source: String = symbols
        .iter()
        .map(|s| format!("int {s}(void) {{ return {CUDA_ERROR_NO_DEVICE}; }}\n"))
        .collect();
    build(dir, "libcuda.so.1", &source)
}

/// `dir/libnvidia-ml.so.1` reporting one idle GPU.
pub fn nvml(dir: &Path) -> bool {
    build(dir, "libnvidia-ml.so.1", NVML)
}
