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
    // Nothing listens on this port: the error names the URL and the first query.
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
            && err.contains("meshfit_collective_time_seconds"),
        "{err}"
    );
    drop(dir);
}
