//! A fleet of 1,000 nodes in a real Prometheus (issue 28): the agents' own exports replicated
//! by scripts/fleet/generate.py with per-node spread and three slow nodes, backfilled with
//! promtool, and the chart's rules evaluating over them. The tuner reduces it in Prometheus at
//! query time and from the recorded curves, names the slow nodes either way, and prices as
//! reading every series does.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use meshfit_e2e::{have, layout_label, tuner_json, wait_for, workspace_bin, Prometheus};
use serde_json::Value;

const NODES: usize = 1000;

/// Writes the fleet's OpenMetrics into `dir` and backfills `dir/data` with it; returns the slow
/// nodes the generator chose.
fn backfill(dir: &Path) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let om = dir.join("fleet.om");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = Command::new("python3")
        .arg(root.join("scripts/fleet/generate.py"))
        .args(["--nodes", &NODES.to_string(), "--slow", "3", "--seed", "7"])
        // Samples five minutes apart up to now: the rules write after the last (a block
        // reaching into the future would have Prometheus refuse their samples), and the
        // server's lookback of an hour keeps it for the test.
        .args(["--samples", "3", "--span", "600"])
        .args(["--end", &now.to_string()])
        .arg("--out")
        .arg(&om)
        .output()
        .expect("python3 runs the fleet generator");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "generate.py: {stderr}");
    let slow: Vec<String> = stderr
        .lines()
        .find_map(|l| l.split_once("slow nodes (x0.7): "))
        .map(|(_, names)| names.split(", ").map(str::to_string).collect())
        .unwrap_or_else(|| panic!("no slow nodes named: {stderr}"));
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(dir.join("data"))
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&om).unwrap();
    slow
}

fn stragglers(doc: &Value) -> Vec<String> {
    doc["measurements"]["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap().to_string())
        .collect()
}

fn first(doc: &Value) -> (String, f64) {
    let m = &doc["meshes"][0];
    (layout_label(m), m["step_time_s"].as_f64().unwrap())
}

#[test]
fn a_thousand_nodes_are_reduced_in_prometheus_and_their_slow_nodes_named() {
    assert!(
        have("prometheus") && have("promtool") && have("python3"),
        "prometheus, promtool and python3 are needed: scripts/test.sh installs Debian's prometheus"
    );
    let dir = tempfile::tempdir().unwrap();
    let slow = backfill(dir.path());
    let rules = chart_rules(dir.path());
    let prom = Prometheus::start_with(
        dir.path(),
        &[],
        Some(&rules),
        &["--query.lookback-delta=1h"],
    );
    let url = format!("http://{}", prom.addr);
    let job = |extra: &[&str]| {
        let mut args = vec![
            "recommend",
            "--model",
            "70b",
            "--gpus",
            "512",
            "--format",
            "json",
            "--prometheus",
            &url,
            "--timeout",
            "300s",
        ];
        args.extend_from_slice(extra);
        tuner_json(&args)
    };
    let reduced = job(&["--fleet-query", "reduced"]);
    let m = &reduced["measurements"];
    assert_eq!(
        m["nodes"],
        serde_json::json!(["fleet/NVIDIA H100 80GB HBM3"]),
        "{m}"
    );
    let note = fleet_note(&reduced);
    assert!(note.contains("reduced in Prometheus"), "{note}");
    // What was read grows with points and stragglers, not with the 1,000 nodes' ~1M series.
    assert!(series_read(&note) < 5_000, "{note}");
    let named = stragglers(&reduced);
    for s in &slow {
        assert!(named.contains(s), "{s} not named among {named:?}");
    }

    let raw = job(&["--fleet-query", "raw"]);
    let raw_named = stragglers(&raw);
    for s in &slow {
        assert!(raw_named.contains(s), "{s} not named by the raw path");
    }
    let (r, f) = (first(&raw), first(&reduced));
    assert_eq!(r.0, f.0);
    assert!((r.1 / f.1 - 1.0).abs() < 0.01, "{r:?} vs {f:?}");

    // A deadline too short is one line naming the query and the timeout; nothing is priced.
    let out = Command::new(workspace_bin("tuner", "tuner"))
        .args(["recommend", "--model", "70b", "--gpus", "512"])
        .args(["--prometheus", &url, "--timeout", "1ms"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(err.contains("timed out after 0.001 s"), "{err}");

    // Once meshfit.fleet.curves has run, past 128 nodes the default reads its curves: a few
    // hundred series, the same price, and the slow nodes named by their peaks. The census is
    // the group's last rule, so its count means the curves are written; the ratios the
    // stragglers are judged on come from the 2m groups.
    let recorded = wait_for(Duration::from_secs(180), || {
        let n = prom.query("sum(model:meshfit_node_gpu_model_info:nodes)");
        n.first().and_then(|s| s["value"][1].as_str()) == Some("1000")
            && [
                "hostname_collective:meshfit_collective_busbw_bytes_per_second:ratio_to_fleet",
                "hostname_gpu_dtype:meshfit_gemm_flops_per_second:ratio_to_fleet",
            ]
            .iter()
            .all(|q| !prom.query(&format!("count({q})")).is_empty())
    });
    assert!(
        recorded,
        "the chart's rules recorded no curves in 3 minutes"
    );
    let from_rules = job(&[]);
    let note = fleet_note(&from_rules);
    assert!(
        note.contains("read from meshfit.fleet.curves's recorded curves"),
        "{note}"
    );
    assert!(series_read(&note) < 1_000, "{note}");
    let named = stragglers(&from_rules);
    for s in &slow {
        assert!(named.contains(s), "{s} not named from the recorded series");
    }
    // Both documents' notes and sources (records per path, stragglers, what fell back) on a
    // mismatch.
    let said = |doc: &Value| {
        format!(
            "{} {}",
            doc["measurements"]["sources"], doc["measurements"]["notes"]
        )
    };
    assert_eq!(
        first(&from_rules),
        first(&reduced),
        "recorded: {}\nreduced: {}",
        said(&from_rules),
        said(&reduced)
    );
    // An aggregate the rules do not record is reduced at query time, and the notes say why.
    let p10 = job(&["--aggregate", "p10"]);
    assert!(fleet_note(&p10).contains("reduced in Prometheus"));
    let why = p10["measurements"]["notes"].to_string();
    assert!(why.contains("--aggregate p10 is not recorded"), "{why}");
}

/// The chart's rule file with every group every 15 s, so that a test sees them run.
fn chart_rules(dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("deploy/helm/meshfit/rules/meshfit.rules.yaml"))
        .expect("the chart's rules");
    let fast: Vec<String> = text
        .lines()
        .map(|l| match l.split_once("interval: ") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}interval: 15s"),
            _ => l.to_string(),
        })
        .collect();
    let path = dir.join("rules.yaml");
    std::fs::write(&path, fast.join("\n")).unwrap();
    path
}

fn fleet_note(doc: &Value) -> String {
    doc["measurements"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("fleet query: 1000 nodes"))
        .unwrap_or_else(|| panic!("{doc}"))
        .to_string()
}

/// The series a fleet note says were read.
fn series_read(note: &str) -> usize {
    note.split(" queries, ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"))
}
