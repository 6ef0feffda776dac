//! Issue 12 end to end: a multi-node fabric run of sim `microbench` processes on loopback,
//! three nodes of two ranks each joined through the launcher variables and the TCP
//! rendezvous, one node's NIC faulted. Each node's records land in its state directory, where
//! a real agent exports them and a real Prometheus scrapes them; the tuner, from the job's
//! file and from Prometheus, names the faulted node and its NIC and ranks differently from
//! the healthy run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use meshfit_e2e::{
    free_port, have, layout_label, promtool_findings, sim_args, tuner_json, value, wait_for,
    workspace_bin, Agent, Prometheus,
};
use serde_json::Value;

/// Nodes of the job and ranks (GPUs) on each.
const NODES: usize = 3;
const RANKS_PER_NODE: usize = 2;
/// The node whose processes run with [`FAULT`]: its NIC 1 is down.
const FAULTED: &str = "n2";
const FAULT: &str = "nic-down:nic=1";
/// A fabric job on loopback takes seconds; this bounds a hung rendezvous.
const JOB_LIMIT: Duration = Duration::from_secs(120);

fn node_name(n: usize) -> String {
    format!("n{n}")
}

/// Runs one fabric job in `dir`, the `fault` on node [`FAULTED`] when given, and returns the
/// job-wide file global rank 0 wrote. Each node's state directory is `dir/<node>`.
fn fabric_job(dir: &Path, fault: Option<&str>) -> PathBuf {
    let microbench = workspace_bin("microbench", "microbench");
    let all = dir.join("all.jsonl");
    let port = free_port().to_string();
    let world = (NODES * RANKS_PER_NODE).to_string();
    let mut ranks: Vec<(usize, Child, PathBuf)> = Vec::new();
    for rank in 0..NODES * RANKS_PER_NODE {
        let node = node_name(rank / RANKS_PER_NODE);
        let state = dir.join(&node);
        std::fs::create_dir_all(&state).unwrap();
        let log = dir.join(format!("rank{rank}.log"));
        let mut cmd = Command::new(&microbench);
        cmd.args(["--backend", "sim", "--profile", "dgx-h100"]);
        if let (Some(f), true) = (fault, node == FAULTED) {
            cmd.args(["--fault", f]);
        }
        cmd.args(["fabric", "-b", "1M", "-e", "64M", "--out"])
            .arg(&all)
            .arg("--state-dir")
            .arg(&state);
        // Only the torchrun-style variables: a CI runner's own launcher variables would
        // describe another job.
        for (k, _) in std::env::vars().filter(|(k, _)| {
            ["SLURM_", "OMPI_", "PMIX_", "MESHFIT_", "TORCHELASTIC_"]
                .iter()
                .any(|p| k.starts_with(p))
                || ["JOB_COMPLETION_INDEX", "GROUP_RANK", "NODE_RANK"].contains(&k.as_str())
        }) {
            cmd.env_remove(k);
        }
        cmd.env("RANK", rank.to_string())
            .env("WORLD_SIZE", &world)
            .env("LOCAL_RANK", (rank % RANKS_PER_NODE).to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .env("TORCHELASTIC_RUN_ID", format!("e2e-{port}"))
            .env("MESHFIT_NODE_NAME", &node)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join(format!("rank{rank}.out"))).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        ranks.push((rank, cmd.spawn().expect("starting microbench"), log));
    }
    let end = Instant::now() + JOB_LIMIT;
    for (rank, child, log) in &mut ranks {
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > end {
                let _ = child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.is_some_and(|s| s.success()),
            "rank {rank} ended {status:?}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    assert!(all.exists(), "rank 0 wrote no {}", all.display());
    all
}

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

/// `tuner recommend` for a 70B model on 64 H100s from `source` (flag and value), as JSON.
fn recommend(source: &[&str]) -> Value {
    let job = [
        "recommend",
        "--model",
        "llama3-70b",
        "--gpus",
        "64",
        "--top",
        "5",
        "--format",
        "json",
        "--compare-nominal",
    ];
    tuner_json(&[&job[..], source].concat())
}

/// The layouts of a recommendation, best first.
fn ranking(doc: &Value) -> Vec<String> {
    doc["meshes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(layout_label)
        .collect()
}

/// The stragglers that name `node`, as "what" lines.
fn named(doc: &Value, node: &str) -> Vec<String> {
    doc["measurements"]["stragglers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["node"] == node)
        .map(|s| s["what"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn issue_12_a_faulted_nic_is_named_from_the_fabric_run_to_the_ranking() {
    let healthy_dir = tempfile::tempdir().unwrap();
    let healthy = fabric_job(healthy_dir.path(), None);
    let dir = tempfile::tempdir().unwrap();
    let faulted = fabric_job(dir.path(), Some(FAULT));

    // Every node's local rank 0 wrote its own file: the job-wide records and its pairs.
    for n in 0..NODES {
        let file = dir.path().join(node_name(n)).join("fabric.jsonl");
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            text.contains("\"scope\":\"inter_node\""),
            "{}",
            file.display()
        );
        assert!(
            text.contains("\"peer_node\""),
            "no pairs in {}",
            file.display()
        );
    }

    // A real agent per node exports its pairs; the faulted node's NIC 1 is the slow rail.
    let agents: Vec<Agent> = (0..NODES)
        .map(|n| {
            let node = node_name(n);
            let state = dir.path().join(&node);
            let args = sim_args("dgx-h100", &state, &node, &[]);
            Agent::start(&args, &[], &dir.path().join(format!("agent-{node}.log")))
        })
        .collect();
    let faulted_agent = &agents[NODES - 1];
    let mut text = String::new();
    let exported = wait_for(Duration::from_secs(30), || {
        text = faulted_agent.metrics();
        pair_series(&text).len() == (NODES - 1) * RANKS_PER_NODE
    });
    assert!(
        exported,
        "pairs not exported:\n{text}\n{}",
        faulted_agent.log_text()
    );
    assert!(value(&text, "meshfit_fabric_last_run_timestamp_seconds{").is_some());
    assert!(
        text.contains("scope=\"inter_node\",ranks=\"6\",ranks_per_node=\"2\""),
        "{text}"
    );
    let pairs = pair_series(&text);
    let rate = |rail: u32| {
        pairs
            .iter()
            .filter(|p| p.1 == rail)
            .map(|p| p.2)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        rate(1) < 0.9 * rate(0),
        "NIC 1 of {FAULTED} not slow: {pairs:?}"
    );
    if have("promtool") {
        assert_eq!(promtool_findings(&text), Vec::<String>::new());
    }

    // The tuner from the job's file: the faulted node and its NIC named, the ranking moved.
    let before = recommend(&["--measurements", healthy.to_str().unwrap()]);
    let after = recommend(&["--measurements", faulted.to_str().unwrap()]);
    assert_eq!(named(&before, FAULTED), Vec::<String>::new());
    let why = named(&after, FAULTED);
    assert!(
        why.iter().any(|w| w.contains("through NIC 1 (")),
        "{FAULTED} not named for its NIC: {}",
        after["measurements"]
    );
    let notes = after["notes"].to_string();
    assert!(notes.contains(&format!("node {FAULTED}'s NIC")), "{notes}");
    // With n2's NIC 1 at half speed, the layouts that reduce gradients across more nodes
    // fall behind those that keep more of the job inside a node: the ranking moves, and each
    // layout that moved says which term of its price the slow NIC raised.
    assert_ne!(
        ranking(&before),
        ranking(&after),
        "the fault changed nothing"
    );
    let causes: Vec<&str> = after["meshes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["shift_cause"].as_str())
        .collect();
    assert!(
        causes.iter().any(|c| c.contains("slower than nominal")),
        "{}",
        after["meshes"]
    );

    // The same from Prometheus scraping the agents.
    if !have("prometheus") {
        return;
    }
    let targets: Vec<_> = agents.iter().map(|a| a.addr).collect();
    let prom = Prometheus::start(dir.path(), &targets);
    let arrived = wait_for(Duration::from_secs(60), || {
        prom.query("count by (hostname) (meshfit_fabric_pair_busbw_bytes_per_second)")
            .len()
            == NODES
    });
    assert!(
        arrived,
        "pair series did not arrive:\n{}",
        std::fs::read_to_string(&prom.log).unwrap_or_default()
    );
    let url = format!("http://{}", prom.addr);
    let live = recommend(&["--prometheus", &url]);
    // The job-wide sweeps arrive as inter-node curves (1, 4, 16 and 64 MiB are exported).
    assert!(
        live["notes"]
            .to_string()
            .contains("inter-node measurements are idle-fabric sweeps"),
        "{}",
        live["notes"]
    );
    assert!(
        named(&live, FAULTED)
            .iter()
            .any(|w| w.contains("through NIC")),
        "{}",
        live["measurements"]
    );
}

/// A fabric results file as `microbench fabric` writes it for node n1 of three: a job-wide
/// all-reduce of 6 ranks, 2 per node, at 1 MiB, and n1's pairs at 64 MiB, rail 0 to n0 at
/// `rail0` bytes/s and rail 1 to n2 at half of 45 GB/s.
fn fabric_file(rail0: f64) -> String {
    let pair = |a: &str, b: &str, rail: u32, bw: f64| {
        fabric_record(
            "send_recv",
            a,
            vec![rail],
            2,
            bw,
            serde_json::json!({"peer_node": b, "ranks_per_node": 1}),
        )
    };
    [
        fabric_record(
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

/// One record of a fabric results file as a JSON line: `kind` from `node` over `gpus`
/// (`ranks` in all) at `bw` bytes/s, at 64 MiB for send/recv and 1 MiB otherwise, with the
/// fields of `extra`.
fn fabric_record(
    kind: &str,
    node: &str,
    gpus: Vec<u32>,
    ranks: u32,
    bw: f64,
    extra: Value,
) -> String {
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
}

/// Issue 28, item 4: a node of a fabric run over N nodes exported (N-1) x rails pair
/// series, 8M at 1,000 nodes. A node of a 1,001-node run now exports per rail its 4 slowest
/// peers and its fastest, the median over all and the peer count, and under 1,100 series in
/// all: 8 GPUs' calibration, counters and facts (about 950) and 8 x 7 fabric series.
#[test]
fn issue_28_a_node_of_a_large_fabric_run_exports_a_bounded_set_of_series() {
    const PEERS: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("n0");
    std::fs::create_dir_all(&state).unwrap();
    let mut file = String::new();
    for rail in 0..8u32 {
        for j in 1..=PEERS {
            // p7's NIC 3 is slow; otherwise peers run from 40 to 41 GB/s.
            let bw = if rail == 3 && j == 7 {
                10e9
            } else {
                40e9 + j as f64 * 1e6
            };
            let extra = serde_json::json!({"peer_node": format!("p{j}"), "ranks_per_node": 1});
            file += &fabric_record("send_recv", "n0", vec![rail], 2, bw, extra);
        }
    }
    std::fs::write(state.join("fabric.jsonl"), file).unwrap();
    let args = sim_args("dgx-h100", &state, "n0", &[]);
    let agent = Agent::start(&args, &[], &dir.path().join("agent.log"));
    meshfit_e2e::wait_calibrated(&agent);
    let complete = || {
        let text = agent.metrics();
        (pair_series(&text).len() == 8 * 5 && text.contains("meshfit_gpu_power_watts{"))
            .then_some(text)
    };
    let mut text = None;
    assert!(
        wait_for(Duration::from_secs(20), || {
            text = complete();
            text.is_some()
        }),
        "{:?}\n{}",
        pair_series(&agent.metrics()),
        agent.log_text()
    );
    let text = text.unwrap();
    let pairs = pair_series(&text);
    let on_rail = |rail: u32| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(_, r, _)| *r == rail)
            .map(|(p, _, _)| p.as_str())
            .collect()
    };
    assert_eq!(on_rail(0), ["p1", "p1000", "p2", "p3", "p4"]);
    assert_eq!(on_rail(3), ["p1", "p1000", "p2", "p3", "p7"]);
    let rail3 = "gpu=\"3\",backend=\"sim\",hostname=\"n0\"}";
    assert_eq!(
        value(&text, &format!("meshfit_fabric_rail_peers{{{rail3}")),
        Some(1000.0)
    );
    // The middle two of 999 healthy peers and p7's 10 GB/s: p500 and p501.
    assert_eq!(
        value(
            &text,
            &format!(
                "meshfit_fabric_rail_median_busbw_bytes_per_second{{model_name=\"NVIDIA H100 80GB HBM3\",{rail3}"
            )
        ),
        Some(40.5005e9)
    );
    let series = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    assert!(series < 1100, "{series} series");
    if have("promtool") {
        assert_eq!(promtool_findings(&text), Vec::<String>::new());
    }
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
            "meshfit_collective_busbw_bytes_per_second{model_name=\"NVIDIA H100 80GB HBM3\",collective=\"all_reduce\",scope=\"inter_node\",ranks=\"6\",ranks_per_node=\"2\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"n1\"}"
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
    let log = agent.log_text();
    let refusal = log.lines().find(|l| l.contains("fabric results refused"));
    assert!(
        refusal.is_some_and(|l| l.contains("fabric.jsonl") && l.contains("line 1")),
        "{log}"
    );
    assert_eq!(
        pairs(),
        [("n0".to_string(), 0, 40e9), ("n2".to_string(), 1, 22.5e9)]
    );
    // Removed: no fabric series any more.
    std::fs::remove_file(&file).unwrap();
    assert!(seen(&[]), "{:?}", pairs());
}
