//! The real agent and its real calibration child on a node whose driver sees a GPU that CUDA
//! cannot use (issue 29): NVML reports one idle H100, and `libcuda.so.1`'s `cuInit` returns
//! CUDA_ERROR_NO_DEVICE, as in a container given the driver's libraries but not the device
//! nodes. Both stand-ins are built here with the C compiler and reach the child through
//! `LD_LIBRARY_PATH`.

use meshfit_e2e::{stub, wait_for, workspace_bin, Agent};
use std::path::Path;
use std::time::Duration;

/// The driver functions microbench calls, as `microbench libs` lists them.
fn driver_symbols() -> Vec<String> {
    let out = std::process::Command::new(workspace_bin("microbench", "microbench"))
        .args(["libs", "--format", "json"])
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .output()
        .expect("running microbench libs");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("libs document");
    doc["libraries"]
        .as_array()
        .expect("libraries")
        .iter()
        .find(|l| l["library"] == "cuda")
        .and_then(|l| l["symbols"].as_array())
        .expect("the driver's symbols")
        .iter()
        .map(|s| s.as_str().expect("a symbol name").to_string())
        .collect()
}

fn stub_driver(dir: &Path) {
    let symbols = driver_symbols();
    let symbols: Vec<&str> = symbols.iter().map(String::as_str).collect();
    assert!(
        stub::driver(dir, &symbols) && stub::nvml(dir),
        "a C compiler (cc) is needed to build the stub driver"
    );
}

#[test]
fn a_driver_without_a_usable_gpu_fails_the_calibration_in_one_line_and_the_agent_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    stub_driver(&lib);
    let state = dir.path().join("state");
    let agent = Agent::start(
        &[
            "--backend",
            "nccl",
            "--state-dir",
            state.to_str().unwrap(),
            "--node-name",
            "stub-node",
            "--jitter",
            "0s",
            "--sample-interval",
            "1s",
        ],
        &[("LD_LIBRARY_PATH", lib.to_str().unwrap())],
        &dir.path().join("log"),
    );
    let failed = "meshfit_calibration_runs_total{result=\"failed\"";
    assert!(
        wait_for(Duration::from_secs(30), || agent
            .metric(failed)
            .is_some_and(|n| n >= 1.0)),
        "no failed calibration:\n{}",
        agent.log_text()
    );
    let log = agent.log_text();
    // One line says why, the run's own, with the driver's code and what to check.
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CUDA_ERROR_NO_DEVICE"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("WARN")
            && said[0].contains("calibration failed: 0/")
            && said[0].contains(
                "microbench ended with exit status: 1: microbench: CUDA did not start: cuInit \
                 returned CUDA_ERROR_NO_DEVICE (100): no CUDA-capable GPU is visible to this \
                 process (check CUDA_VISIBLE_DEVICES"
            ),
        "{}",
        said[0]
    );
    assert!(!log.contains("panicked"), "{log}");
    // The run is recorded as failed, with the child's reason, and kept across restarts.
    let results: serde_json::Value = serde_json::from_str(&agent.get("/v1/results").body).unwrap();
    let run = &results["last_run"];
    assert_eq!(run["result"], "failed");
    assert_eq!(run["points_done"], 0);
    assert!(
        run["reason"]
            .as_str()
            .unwrap()
            .contains("cuInit returned CUDA_ERROR_NO_DEVICE (100)"),
        "{run}"
    );
    let saved = std::fs::read_to_string(state.join("calibration.json")).unwrap_or_default();
    assert!(saved.contains("CUDA_ERROR_NO_DEVICE"), "{saved}");
    // The agent still serves: NVML sees the GPU, the last run failed, nothing is measured.
    for _ in 0..2 {
        let metrics = agent.get("/metrics");
        assert_eq!(metrics.status, 200);
        let text = metrics.body;
        assert!(
            text.contains(
                "meshfit_calibration_last_result{result=\"failed\",hostname=\"stub-node\",\
                 backend=\"nccl\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("meshfit_up{hostname=\"stub-node\",backend=\"nccl\"} 1"));
        assert!(!text.contains("meshfit_collective_time_seconds{"));
    }
    assert_eq!(agent.get("/healthz").status, 200);
}
