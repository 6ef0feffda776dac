//! `microbench libs` and the first driver call, on a machine without NVIDIA's libraries: what
//! it reports when nothing loads, and, with a stub `libcuda.so.1` built here whose every
//! function returns CUDA_ERROR_NO_DEVICE, that the GPU commands stop at cuInit with one
//! line and exit 1 instead of panicking. The real NCCL and cuBLASLt are checked by
//! `scripts/check-libs.sh` against NVIDIA's wheels.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

#[path = "../../tests/src/stub.rs"]
#[allow(dead_code)] // the NVML stub is for the end-to-end tests
mod stub;

/// `microbench libs --json` with `LD_LIBRARY_PATH` set to `dir`: its document and exit code.
fn libs(dir: &Path) -> (Value, Option<i32>) {
    let out = Command::cargo_bin("microbench")
        .unwrap()
        .args(["libs", "--format", "json"])
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap();
    (doc, out.status.code())
}

fn library<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["library"] == name)
        .unwrap()
}

/// This machine's own libraries, when it has NVIDIA's: then these tests say nothing.
fn has_nvidia_libraries() -> bool {
    let (doc, _) = libs(Path::new("/nonexistent"));
    doc["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| !l["name"].is_null())
}

#[test]
fn without_the_libraries_libs_names_what_it_tried_and_exits_1() {
    if has_nvidia_libraries() {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let (doc, code) = libs(empty.path());
    assert_eq!(code, Some(1));
    assert_eq!(doc["usable"], false);
    let nccl = library(&doc, "nccl");
    assert_eq!(nccl["tried"][0], "libnccl.so.2");
    let error = nccl["error"].as_str().unwrap();
    assert!(error.contains("tried libnccl.so.2, libnccl.so"), "{error}");
    let lt = library(&doc, "cublas_lt");
    assert_eq!(lt["tried"][0], "libcublasLt.so.13");
    assert!(lt["symbols"]
        .as_array()
        .unwrap()
        .contains(&Value::from("cublasLtMatmul")));
}

#[test]
fn a_driver_without_a_gpu_stops_every_gpu_command_at_cuinit_in_one_line() {
    if has_nvidia_libraries() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (doc, _) = libs(dir.path());
    let symbols: Vec<&str> = library(&doc, "cuda")["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        stub::driver(dir.path(), &symbols),
        "a C compiler (cc) is needed to build the stub driver"
    );
    let (doc, _) = libs(dir.path());
    let cuda = library(&doc, "cuda");
    assert_eq!(cuda["name"], "libcuda.so.1");
    let path = cuda["path"].as_str().unwrap();
    assert!(path.starts_with(dir.path().to_str().unwrap()), "{path}");
    assert_eq!(cuda["missing_symbols"], Value::Array(vec![]));
    // cuDriverGetVersion fails too: no version is made up.
    assert!(cuda["version"].is_null());
    for args in [&["gemm"][..], &["copy"], &["calibrate", "--json"]] {
        let out = Command::cargo_bin("microbench")
            .unwrap()
            .args(args)
            .env("LD_LIBRARY_PATH", dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err,
            "microbench: CUDA did not start: cuInit returned CUDA_ERROR_NO_DEVICE (100): no \
             CUDA-capable GPU is visible to this process (check CUDA_VISIBLE_DEVICES, and that \
             a container was given the GPUs)\n",
            "{args:?}"
        );
    }
}
