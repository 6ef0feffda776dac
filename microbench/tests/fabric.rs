//! Issue 12: several `microbench` processes on loopback form a multi-node sim job through
//! each launcher's variables, as CI runs it without a GPU.

use record::{Kind, Record, Scope};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_microbench");

/// A port nothing listens on now; rank 0 binds it a moment later.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What a launcher sets for `rank` of `world`, two ranks per node, rank 0 at `port`; the
/// job's id (the launcher's own, or what the chart sets on Kubernetes) follows the port.
fn launcher_env(launcher: &str, rank: u32, world: u32, port: u16) -> Vec<(String, String)> {
    let (r, w, l) = (rank.to_string(), world.to_string(), (rank % 2).to_string());
    let vars: Vec<(&str, String)> = match launcher {
        "torchrun" => vec![
            ("RANK", r),
            ("WORLD_SIZE", w),
            ("LOCAL_RANK", l),
            ("GROUP_RANK", (rank / 2).to_string()),
            ("TORCHELASTIC_RUN_ID", format!("run-{port}")),
        ],
        "slurm" => vec![
            ("SLURM_PROCID", r),
            ("SLURM_NTASKS", w),
            ("SLURM_LOCALID", l),
            ("SLURM_NODEID", (rank / 2).to_string()),
            ("SLURM_JOB_ID", port.to_string()),
        ],
        "mpi" => vec![
            ("OMPI_COMM_WORLD_RANK", r),
            ("OMPI_COMM_WORLD_SIZE", w),
            ("OMPI_COMM_WORLD_LOCAL_RANK", l),
            ("PMIX_NAMESPACE", format!("prterun-host-{port}@1")),
        ],
        "k8s" => vec![
            ("JOB_COMPLETION_INDEX", (rank / 2).to_string()),
            ("MESHFIT_WORLD_SIZE", w),
            ("MESHFIT_RANKS_PER_POD", "2".into()),
            ("MESHFIT_LOCAL_RANK", l),
            ("MESHFIT_JOB_ID", format!("fabric-{port}")),
        ],
        other => panic!("no launcher {other}"),
    };
    let mut env: Vec<(String, String)> =
        vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    env.push(("MASTER_ADDR".into(), "127.0.0.1".into()));
    env.push(("MASTER_PORT".into(), port.to_string()));
    env.push(("MESHFIT_NODE_NAME".into(), format!("n{}", rank / 2)));
    env
}

/// Every launcher variable the tests set, cleared so the runner's own environment (a CI job
/// under Slurm) cannot leak in.
const CLEARED: &[&str] = &[
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "GROUP_RANK",
    "NODE_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURMD_NODENAME",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_RANK",
    "JOB_COMPLETION_INDEX",
    "MESHFIT_WORLD_SIZE",
    "MESHFIT_RANKS_PER_POD",
    "MESHFIT_LOCAL_RANK",
    "MESHFIT_NODE_NAME",
    "MESHFIT_JOB_ID",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "MESHFIT_STATE_DIR",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MICROBENCH_BACKEND",
];

fn spawn(env: &[(String, String)], args: &[String]) -> Child {
    let mut cmd = Command::new(BIN);
    for var in CLEARED {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

struct Done {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Waits for every child, killing all of them if any runs past `limit`.
fn wait_all(children: Vec<Child>, limit: Duration) -> Vec<Done> {
    let deadline = Instant::now() + limit;
    let mut children = children;
    while children.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        if Instant::now() > deadline {
            for c in &mut children {
                let _ = c.kill();
            }
            panic!("the job ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            Done {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into(),
                stderr: String::from_utf8_lossy(&out.stderr).into(),
            }
        })
        .collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn sim(extra: &[&str]) -> Vec<String> {
    strings(&[&["--backend", "sim", "--profile", "dgx-h100"][..], extra].concat())
}

/// Starts `world` ranks under `launcher`, rank r with `per_rank(r)` arguments.
fn job(launcher: &str, world: u32, per_rank: impl Fn(u32) -> Vec<String>) -> Vec<Done> {
    let port = free_port();
    let children = (0..world)
        .map(|r| spawn(&launcher_env(launcher, r, world, port), &per_rank(r)))
        .collect();
    wait_all(children, Duration::from_secs(20))
}

fn records(text: &str) -> Vec<Record> {
    record::read_json_lines(text).unwrap()
}

#[test]
fn ranks_rendezvous_under_each_launcher_and_match_the_single_process_sim() {
    let args = sim(&["--json", "all-reduce", "-b", "1M", "-e", "64M"]);
    let alone = Command::new(BIN)
        .args(sim(&[
            "--launcher",
            "none",
            "--nodes",
            "2",
            "--json",
            "all-reduce",
            "-b",
            "1M",
            "-e",
            "64M",
            "-g",
            "2",
        ]))
        .output()
        .unwrap();
    assert!(alone.status.success());
    let mut expected = records(&String::from_utf8_lossy(&alone.stdout));
    assert_eq!(expected.len(), 2 * 7);
    // The job names rank 0's node where one process names its sim node, and every node that
    // took part.
    for r in &mut expected {
        r.group.node = Some("n0".into());
        r.detail.nodes = Some(vec!["n0".into(), "n1".into()]);
    }
    for launcher in ["torchrun", "slurm", "mpi", "k8s"] {
        let done = job(launcher, 4, |_| args.clone());
        for (rank, d) in done.iter().enumerate() {
            assert_eq!(d.code, Some(0), "{launcher} rank {rank}: {}", d.stderr);
        }
        let got = records(&done[0].stdout);
        assert_eq!(got, expected, "{launcher}");
        assert!(got.iter().all(|r| r.group.scope == Scope::InterNode
            && r.group.ranks == 4
            && r.detail.ranks_per_node == Some(2)));
        assert!(done[1..].iter().all(|d| d.stdout.is_empty()), "{launcher}");
    }
}

#[test]
fn fabric_names_the_node_and_nic_that_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.jsonl");
    let state = |node: u32| dir.path().join(format!("state-n{node}"));
    let done = job("torchrun", 8, |r| {
        let fault = if r / 2 == 2 {
            vec!["--fault", "nic-down:nic=1"]
        } else {
            vec![]
        };
        let mut args = sim(&fault);
        args.extend(strings(&[
            "--format", "json", "fabric", "-b", "16M", "-e", "64M", "-n", "5",
        ]));
        args.extend(strings(&["--out", out.to_str().unwrap()]));
        args.push("--state-dir".into());
        args.push(state(r / 2).display().to_string());
        args
    });
    for (rank, d) in done.iter().enumerate() {
        assert_eq!(d.code, Some(0), "rank {rank}: {}", d.stderr);
    }
    let report: Vec<&str> = done[0]
        .stderr
        .lines()
        .filter(|l| l.starts_with("slow:"))
        .collect();
    assert_eq!(report.len(), 1, "{}", done[0].stderr);
    assert!(
        report[0].starts_with("slow: node n2 NIC 1 (rail 1): ")
            && report[0].ends_with("on pairs n2-n0, n2-n1, n2-n3"),
        "{}",
        report[0]
    );

    let all = records(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(records(&done[0].stdout), all);
    let (pairs, wide): (Vec<&Record>, Vec<&Record>) =
        all.iter().partition(|r| r.detail.peer_node.is_some());
    // 4 collectives x 2 shapes (all 8 ranks, one GPU per node) x 3 sizes x 2 (in place or not).
    assert_eq!(wide.len(), 4 * 2 * 3 * 2);
    let job_nodes: Vec<String> = (0..4).map(|n| format!("n{n}")).collect();
    assert!(wide.iter().all(|r| r.group.node.as_deref() == Some("n0")
        && r.group.scope == Scope::InterNode
        && r.detail.ranks_per_node == Some(r.group.ranks / 4)
        && r.detail.nodes.as_ref() == Some(&job_nodes)));
    assert!(pairs.iter().all(|p| p.detail.nodes.is_none()));
    // 6 node pairs x 2 rails at the largest size.
    assert_eq!(pairs.len(), 6 * 2);
    for p in &pairs {
        assert_eq!(
            (p.kind, p.group.ranks, p.detail.ranks_per_node, p.bytes),
            (Kind::SendRecv, 2, Some(1), 64 << 20)
        );
        assert_eq!(p.backend, record::Backend::Sim);
        let ends = [
            p.group.node.clone().unwrap(),
            p.detail.peer_node.clone().unwrap(),
        ];
        let slow = p.busbw.unwrap() < 30e9;
        assert_eq!(
            slow,
            p.group.gpus == [1] && ends.contains(&"n2".into()),
            "{ends:?}"
        );
    }
    // Each node's state file: the job-wide records and the pairs it is an end of.
    for node in 0..4 {
        let name = format!("n{node}");
        let mine = records(&std::fs::read_to_string(state(node).join("fabric.jsonl")).unwrap());
        let expected: Vec<Record> = all
            .iter()
            .filter(|r| match &r.detail.peer_node {
                Some(peer) => *peer == name || r.group.node.as_deref() == Some(&name),
                None => true,
            })
            .cloned()
            .collect();
        assert_eq!(mine.len(), wide.len() + 3 * 2, "{name}");
        assert_eq!(mine, expected, "{name}");
    }
}

/// Three trays of one GB200 NVL72 rack, two ranks each: NCCL joins them over the rack's
/// NVLink, so every record says `nvlink_domains` 1 and runs at NVLink speed (0.85 of a
/// GPU's 900 GB/s for the rings, 0.9 for the pairs), not a 50 GB/s NIC's, and the pairs
/// judge no NIC.
#[test]
fn a_fabric_run_inside_one_nvl72_rack_runs_over_nvlink() {
    let done = job("torchrun", 6, |_| {
        strings(&[
            "--backend",
            "sim",
            "--profile",
            "gb200-nvl72",
            "--format",
            "json",
            "fabric",
            "-b",
            "256M",
            "-e",
            "1G",
            "-n",
            "5",
        ])
    });
    for (rank, d) in done.iter().enumerate() {
        assert_eq!(d.code, Some(0), "rank {rank}: {}", d.stderr);
    }
    assert!(!done[0].stderr.contains("slow:"), "{}", done[0].stderr);
    let all = records(&done[0].stdout);
    assert!(!all.is_empty());
    assert!(all
        .iter()
        .all(|r| r.group.scope == Scope::InterNode && r.detail.nvlink_domains == Some(1)));
    let largest = all
        .iter()
        .filter(|r| r.bytes == 1 << 30 && r.kind == Kind::AllReduce && !r.in_place);
    for r in largest {
        let bw = r.busbw.unwrap();
        assert!(
            (0.9 * 765e9..765e9).contains(&bw),
            "{} ranks: {bw}",
            r.group.ranks
        );
    }
    for p in all.iter().filter(|r| r.detail.peer_node.is_some()) {
        let bw = p.busbw.unwrap();
        assert!((0.95 * 810e9..810e9).contains(&bw), "{bw}");
    }
}

#[test]
fn a_rank_that_never_arrives_ends_the_job_naming_it() {
    let started = Instant::now();
    let port = free_port();
    let args = sim(&["--rendezvous-timeout", "1.5", "all-reduce", "-e", "1M"]);
    let children = (0..3)
        .map(|r| spawn(&launcher_env("torchrun", r, 4, port), &args))
        .collect();
    let done = wait_all(children, Duration::from_secs(15));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(done[0].code, Some(1));
    assert!(
        done[0].stderr.contains(&format!(
            "rendezvous at 127.0.0.1:{port}: rank 3 never arrived within 1.5 s"
        )),
        "{}",
        done[0].stderr
    );
    for d in &done[1..] {
        assert_eq!(d.code, Some(1));
        assert!(d.stderr.contains("rank 0 ended the job: "), "{}", d.stderr);
        assert!(d.stderr.contains("rank 3 never arrived"), "{}", d.stderr);
    }
}

/// A rank started with another job's id (`--job-id`, over the launcher's) is refused by
/// rank 0 with both ids named, exit 1, and rank 0's job, short of that rank, ends at its
/// deadline naming the refusal (issue 30: rank 0 took any client).
#[test]
fn a_rank_of_another_job_is_refused_with_both_ids() {
    let port = free_port();
    let args = |r: u32| {
        let other: &[&str] = if r == 1 {
            &["--job-id", "someone-else"]
        } else {
            &[]
        };
        sim(&[
            other,
            &["--rendezvous-timeout", "1.5", "all-reduce", "-e", "1M"],
        ]
        .concat())
    };
    let children = (0..2)
        .map(|r| spawn(&launcher_env("torchrun", r, 2, port), &args(r)))
        .collect();
    let done = wait_all(children, Duration::from_secs(15));
    let refusal = format!(
        "rank 1 on {host} presented job id `someone-else`, and this rendezvous (rank 0 on \
         {host}) is job `run-{port}`",
        host = hostname()
    );
    assert_eq!(done[1].code, Some(1));
    assert!(
        done[1]
            .stderr
            .contains(&format!("rank 0 refused rank 1: {refusal}")),
        "{}",
        done[1].stderr
    );
    assert_eq!(done[0].code, Some(1));
    assert!(
        done[0].stderr.contains("rank 1 never arrived within 1.5 s")
            && done[0].stderr.contains(&format!("refused: {refusal}")),
        "{}",
        done[0].stderr
    );
}

/// This machine's host name, as a rank reports it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_busy_gpu_takes_its_node_out_and_the_job_says_so() {
    let done = job("slurm", 6, |r| {
        let busy = if r == 5 { vec!["--busy", "1"] } else { vec![] };
        let mut args = sim(&busy);
        args.extend(strings(&[
            "--json", "fabric", "-b", "64M", "-e", "64M", "-n", "2",
        ]));
        args
    });
    for (rank, d) in done.iter().enumerate() {
        assert_eq!(d.code, Some(0), "rank {rank}: {}", d.stderr);
    }
    assert!(
        done[0]
            .stderr
            .contains("skipped node n2: GPU busy on rank [5]"),
        "{}",
        done[0].stderr
    );
    for d in &done[4..] {
        assert!(d.stderr.contains("the node leaves the job"), "{}", d.stderr);
    }
    let all = records(&done[0].stdout);
    let nodes: BTreeMap<String, usize> = all
        .iter()
        .filter_map(|r| r.detail.peer_node.clone())
        .fold(BTreeMap::new(), |mut m, n| {
            *m.entry(n).or_default() += 1;
            m
        });
    assert_eq!(nodes, BTreeMap::from([("n1".to_string(), 2)]));
    assert!(all
        .iter()
        .filter(|r| r.detail.peer_node.is_none())
        .all(|r| r.group.ranks <= 4));
    // With two nodes left there is one pair per rail, which names nothing.
    assert!(
        done[0].stderr.contains("pairwise: 2 node(s)"),
        "{}",
        done[0].stderr
    );
}

#[test]
fn fabric_outside_a_job_says_how_to_start_one() {
    let out = Command::new(BIN)
        .env_remove("WORLD_SIZE")
        .env_remove("SLURM_PROCID")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMIX_RANK")
        .env_remove("JOB_COMPLETION_INDEX")
        .args(sim(&["fabric"]))
        .output()
        .unwrap();
    // A usage error (issue 11): the same line works when started under a launcher.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fabric runs across a multi-node job"), "{err}");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for recipe in ["mpirun -np", "srun -N", "JOB_COMPLETION_INDEX"] {
        assert!(help.contains(recipe), "{recipe}: {help}");
    }
}

/// Issue 12, `--backend nccl` on a machine without a GPU (CI): every rank, rank 0 included,
/// says at the rendezvous that it cannot measure, so the whole job ends within a second or
/// two with one line on each rank naming every rank, its host and the reason, and no rank
/// waits in NCCL's init or for a rank that already gave up.
#[test]
fn nccl_ranks_without_a_gpu_all_fail_fast_and_name_why() {
    use microbench::kernels::{check_libraries, Library};
    if check_libraries(&[Library::Cuda]).is_ok() {
        eprintln!("a CUDA driver is present: scripts/device-check.sh runs the real job");
        return;
    }
    for (world, command) in [(2, &["all-reduce", "-e", "1M"][..]), (4, &["fabric"][..])] {
        let started = Instant::now();
        let args = strings(
            &[
                &["--backend", "nccl", "--rendezvous-timeout", "30"][..],
                command,
            ]
            .concat(),
        );
        let done = job("torchrun", world, |_| args.clone());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{world} ranks took {:?}",
            started.elapsed()
        );
        let ranks: Vec<String> = (0..world).map(|r| format!("rank {r} on ")).collect();
        for (r, d) in done.iter().enumerate() {
            assert_eq!(d.code, Some(1), "rank {r}: {}", d.stderr);
            assert_eq!(d.stderr.lines().count(), 1, "rank {r}: {}", d.stderr);
            assert!(d.stdout.is_empty(), "rank {r}: {}", d.stdout);
            let line = &d.stderr;
            assert!(
                line.starts_with(&format!(
                    "microbench: rank {r} of {world} on n{} (torchrun): ",
                    r / 2
                )) && line.contains("the job cannot run: ")
                    && ranks.iter().all(|name| line.contains(name))
                    && line.contains("no NVIDIA driver: libcuda.so.1 cannot be loaded"),
                "rank {r}: {line}"
            );
            if r > 0 {
                assert!(line.contains("rank 0 ended the job: "), "rank {r}: {line}");
            }
        }
    }
}
