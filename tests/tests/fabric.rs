//! Issue 12 end to end: the fabric results a multi-node `microbench fabric` run leaves in
//! each node's state directory, served by a real agent.

use std::time::Duration;

use meshfit_e2e::{have, promtool_findings, sim_args, value, wait_for, Agent};
use serde_json::Value;

/// Each `meshfit_fabric_pair_busbw_bytes_per_second` series of `text`: (peer, rail, value).
fn pair_series(text: &str) -> Vec<(String, u32, f64)> {
    let label = |line: &str, name: &str| {
        line.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string)
    };
    text.lines()
        .filter(|l| l.starts_with("meshfit_fabric_pair_busbw_bytes_per_second{"))
        .filter_map(|l| {
            Some((
                label(l, "peer_node")?,
                label(l, "gpu")?.parse().ok()?,
                l.rsplit(' ').next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// A fabric results file as `microbench fabric` writes it for node n1 of three: a job-wide
/// all-reduce of 6 ranks, 2 per node, at 1 MiB, and n1's pairs at 64 MiB, rail 0 to n0 at
/// `rail0` bytes/s and rail 1 to n2 at half of 45 GB/s.
fn fabric_file(rail0: f64) -> String {
    let record = |kind: &str, node: &str, gpus: Vec<u32>, ranks: u32, bw: f64, extra: Value| {
        let bytes: u64 = if kind == "send_recv" {
            64 << 20
        } else {
            1 << 20
        };
        let mut r = serde_json::json!({
            "kind": kind, "backend": "sim", "node": node, "gpus": gpus,
            "scope": "inter_node", "ranks": ranks, "bytes": bytes, "dtype": "fp32",
            "time_s": bytes as f64 / bw, "time_min_s": null, "time_max_s": null, "iters": 20,
            "clock": "model", "algbw": bw, "busbw": bw, "flops": null, "timestamp": 1.7e9
        });
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        format!("{r}\n")
    };
    let pair = |a: &str, b: &str, rail: u32, bw: f64| {
        record(
            "send_recv",
            a,
            vec![rail],
            2,
            bw,
            serde_json::json!({"peer_node": b, "ranks_per_node": 1}),
        )
    };
    [
        record(
            "all_reduce",
            "n0",
            vec![0, 1, 0, 1, 0, 1],
            6,
            80e9,
            serde_json::json!({"ranks_per_node": 2}),
        ),
        pair("n0", "n1", 0, rail0),
        pair("n1", "n2", 1, 22.5e9),
    ]
    .concat()
}

#[test]
fn issue_12_the_agent_serves_the_fabric_file_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("n1");
    std::fs::create_dir_all(&state).unwrap();
    let file = state.join("fabric.jsonl");
    std::fs::write(&file, fabric_file(45e9)).unwrap();
    let args = sim_args("dgx-h100", &state, "n1", &[]);
    let agent = Agent::start(&args, &[], &dir.path().join("agent.log"));
    let pairs = || pair_series(&agent.metrics());
    let seen = |want: &[(&str, u32, f64)]| {
        let want: Vec<(String, u32, f64)> = want
            .iter()
            .map(|(p, r, v)| (p.to_string(), *r, *v))
            .collect();
        wait_for(Duration::from_secs(10), || pairs() == want)
    };
    assert!(
        seen(&[("n0", 0, 45e9), ("n2", 1, 22.5e9)]),
        "{:?}\n{}",
        pairs(),
        agent.log_text()
    );
    let text = agent.metrics();
    assert_eq!(
        value(
            &text,
            "meshfit_collective_busbw_bytes_per_second{collective=\"all_reduce\",scope=\"inter_node\",ranks=\"6\",ranks_per_node=\"2\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"n1\"}"
        ),
        Some(80e9),
        "{text}"
    );
    assert_eq!(
        value(&text, "meshfit_fabric_last_run_timestamp_seconds{"),
        Some(1.7e9)
    );
    if have("promtool") {
        assert_eq!(promtool_findings(&text), Vec::<String>::new());
    }
    // A new run is read when the file changes.
    std::fs::write(&file, fabric_file(40e9)).unwrap();
    assert!(seen(&[("n0", 0, 40e9), ("n2", 1, 22.5e9)]), "{:?}", pairs());
    // A half-written or foreign file is refused by name; the last good run stays.
    std::fs::write(&file, "{\"kind\": \"send_recv\"\n").unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || agent
            .log_text()
            .contains("fabric results refused")),
        "{}",
        agent.log_text()
    );
    assert!(
        agent.log_text().contains("fabric.jsonl: line 1"),
        "{}",
        agent.log_text()
    );
    assert_eq!(
        pairs(),
        [("n0".to_string(), 0, 40e9), ("n2".to_string(), 1, 22.5e9)]
    );
    // Removed: no fabric series any more.
    std::fs::remove_file(&file).unwrap();
    assert!(seen(&[]), "{:?}", pairs());
}
