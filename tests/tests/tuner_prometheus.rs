//! The tuner against a real Prometheus (issue 5): two sim agents scraped by Prometheus on
//! loopback, `tuner recommend --prometheus`, `tuner snapshot`, and the same ranking offline
//! from the snapshot.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use meshfit_e2e::{
    have, layout_label, output_of, sim_args, tuner_json, wait_calibrated, wait_for, workspace_bin,
    Agent, Prometheus,
};
use serde_json::Value;

fn agent(dir: &Path, node: &str) -> Agent {
    let state = dir.join(node);
    let args = sim_args("dgx-h100", &state, node, &[]);
    let a = Agent::start(&args, &[], &dir.join(format!("{node}.log")));
    wait_calibrated(&a);
    a
}

fn layouts(doc: &Value) -> Vec<(String, f64)> {
    doc["meshes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                format!(
                    "{} {} {}",
                    layout_label(m),
                    m["recompute"],
                    m["sequence_parallel"]
                ),
                m["step_time_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn recommend_from_prometheus_and_the_same_ranking_from_its_snapshot() {
    assert!(
        have("prometheus"),
        "prometheus is not installed: scripts/test.sh installs Debian's package"
    );
    let dir = tempfile::tempdir().unwrap();
    let a = agent(dir.path(), "node-a");
    let b = agent(dir.path(), "node-b");
    let prom = Prometheus::start(dir.path(), &[a.addr, b.addr]);
    let arrived = wait_for(Duration::from_secs(60), || {
        prom.query("count by (hostname) (meshfit_collective_time_seconds)")
            .len()
            == 2
            && prom
                .query("count by (hostname) (meshfit_gemm_flops_per_second)")
                .len()
                == 2
    });
    assert!(
        arrived,
        "series did not arrive:\n{}",
        std::fs::read_to_string(&prom.log).unwrap_or_default()
    );
    let url = format!("http://{}", prom.addr);
    let job = [
        "recommend",
        "--model",
        "70b",
        "--gpus",
        "512",
        "--format",
        "json",
        "--top",
        "5",
    ];
    let live = tuner_json(&[&job[..], &["--prometheus", &url, "--window", "1h"]].concat());
    let m = &live["measurements"];
    assert!(
        m["sources"][0]
            .as_str()
            .unwrap()
            .contains(&format!("prometheus {url}")),
        "{m}"
    );
    assert_eq!(m["nodes"], serde_json::json!(["node-a", "node-b"]));
    assert!(
        m["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("sim backend")),
        "sim data is named: {m}"
    );
    assert_eq!(live["meshes"][0]["sources"]["tp_comm"], "measured");
    assert_eq!(live["meshes"][0]["sources"]["compute"], "measured");

    let snap = dir.path().join("snap.json");
    output_of(
        "tuner",
        "tuner",
        &[
            "snapshot",
            "--prometheus",
            &url,
            "--window",
            "1h",
            "-o",
            snap.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(
        text.trim_start().starts_with("{\n  \"format_version\": 1"),
        "{}",
        &text[..80.min(text.len())]
    );
    // Prometheus is stopped: the snapshot alone must give the same ranking.
    drop(prom);
    let offline = tuner_json(&[&job[..], &["--measurements", snap.to_str().unwrap()]].concat());
    let (l, o) = (layouts(&live), layouts(&offline));
    assert_eq!(l.len(), o.len());
    for ((la, ls), (oa, os)) in l.iter().zip(&o) {
        assert_eq!(la, oa);
        assert!((ls / os - 1.0).abs() < 1e-9, "{ls} vs {os}");
    }
}

#[test]
fn prometheus_errors_name_the_query() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port: the error names the URL and the first query, the census
    // of the fleet's GPU models.
    let port = meshfit_e2e::free_port();
    let out = Command::new(workspace_bin("tuner", "tuner"))
        .args([
            "recommend",
            "--model",
            "70b",
            "--gpus",
            "512",
            "--prometheus",
            &format!("http://127.0.0.1:{port}"),
            "--timeout",
            "2s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("prometheus http://127.0.0.1:{port}"))
            && err.contains("meshfit_gpu_info"),
        "{err}"
    );
    drop(dir);
}

/// Issue 28, item 1: the fleet reduced in Prometheus prices as its raw series do, names the
/// slow node as the raw path does, and its compact snapshot gives the same ranking offline.
#[test]
fn the_fleet_reduced_in_prometheus_prices_as_its_raw_series() {
    assert!(
        have("prometheus"),
        "prometheus is not installed: scripts/test.sh installs Debian's package"
    );
    let dir = tempfile::tempdir().unwrap();
    let a = agent(dir.path(), "node-a");
    let b = agent(dir.path(), "node-b");
    let slow = {
        let state = dir.path().join("node-c");
        let args = sim_args(
            "dgx-h100",
            &state,
            "node-c",
            &["--fault", "slow-gpu:gpu=3,factor=0.6"],
        );
        let c = Agent::start(&args, &[], &dir.path().join("node-c.log"));
        wait_calibrated(&c);
        c
    };
    let prom = Prometheus::start(dir.path(), &[a.addr, b.addr, slow.addr]);
    let arrived = wait_for(Duration::from_secs(60), || {
        prom.query("count by (hostname) (meshfit_gemm_flops_per_second)")
            .len()
            == 3
            && prom.query("count by (hostname) (meshfit_gpu_info)").len() == 3
            && prom
                .query("count by (hostname) (meshfit_collective_time_seconds)")
                .len()
                == 3
    });
    assert!(arrived, "series did not arrive");
    let url = format!("http://{}", prom.addr);
    let job = |mode: &str, extra: &[&str]| {
        let mut args = vec![
            "recommend",
            "--model",
            "70b",
            "--gpus",
            "512",
            "--format",
            "json",
            "--top",
            "5",
            "--prometheus",
            &url,
            "--window",
            "1h",
            "--fleet-query",
            mode,
        ];
        args.extend_from_slice(extra);
        tuner_json(&args)
    };
    let raw = job("raw", &[]);
    let reduced = job("reduced", &[]);
    let m = &reduced["measurements"];
    assert_eq!(
        m["nodes"],
        serde_json::json!(["fleet/NVIDIA H100 80GB HBM3"]),
        "{m}"
    );
    let named = |doc: &Value| -> Vec<String> {
        doc["measurements"]["stragglers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["node"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        named(&raw).iter().any(|n| n == "node-c"),
        "{}",
        raw["measurements"]
    );
    let flagged = named(&reduced);
    assert!(
        !flagged.is_empty() && flagged.iter().all(|n| n == "node-c"),
        "{m}"
    );
    // The aggregate per point and the fit of per-node curves agree to a few per cent.
    let (r, f) = (layouts(&raw), layouts(&reduced));
    assert_eq!(r[0].0, f[0].0, "{r:?} vs {f:?}");
    assert!((r[0].1 / f[0].1 - 1.0).abs() < 0.03, "{r:?} vs {f:?}");

    // Left out, the slow node no longer sets the pace, and what keeping it costs is priced.
    let kept = job("reduced", &["--exclude-degraded"]);
    let km = &kept["measurements"];
    assert!(
        km["excluded"][0][0] == "node-c" && km["keep_cost"].as_str().unwrap().contains("node-c"),
        "{km}"
    );
    assert!(layouts(&kept)[0].1 < f[0].1, "{km}");

    let snap = dir.path().join("compact.json");
    output_of(
        "tuner",
        "tuner",
        &[
            "snapshot",
            "--compact",
            "--prometheus",
            &url,
            "--window",
            "1h",
            "-o",
            snap.to_str().unwrap(),
        ],
    );
    drop(prom);
    let offline = tuner_json(&[
        "recommend",
        "--model",
        "70b",
        "--gpus",
        "512",
        "--format",
        "json",
        "--top",
        "5",
        "--measurements",
        snap.to_str().unwrap(),
    ]);
    assert_eq!(named(&offline), flagged);
    let o = layouts(&offline);
    assert_eq!(o.len(), f.len());
    for ((fa, fs), (oa, os)) in f.iter().zip(&o) {
        assert_eq!(fa, oa);
        assert!((fs / os - 1.0).abs() < 1e-9, "{fs} vs {os}");
    }
}
