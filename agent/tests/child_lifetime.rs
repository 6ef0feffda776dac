//! Issue 31, item 8: after `kill -9` of the agent its calibration child was reparented and
//! kept the GPUs. The real agent binary (sim backend) runs a stand-in child, a script that
//! writes its PID and becomes `sleep`; the agent is killed with SIGKILL and the child must be
//! gone within seconds.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// True while `pid` runs: it exists and is not a zombie waiting for a parent to reap it.
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z'))
}

fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// A stand-in for microbench that writes its PID to `pid_file` and sleeps as that PID.
fn fake_microbench(dir: &Path, pid_file: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("microbench");
    let written = pid_file.with_extension("tmp");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > '{}' && mv '{}' '{}'\nexec sleep 600\n",
            written.display(),
            written.display(),
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn r31_the_calibration_child_dies_with_an_agent_killed_by_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let script = fake_microbench(dir.path(), &pid_file);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent"));
    cmd.args([
        "--backend",
        "sim",
        "--profile",
        "dgx-h100",
        "--node-name",
        "n1",
    ])
    .args(["--listen", "127.0.0.1:0"])
    .arg("--microbench-bin")
    .arg(&script)
    // No saved calibration and no jitter: a run, and so the child, starts at once.
    .args(["--jitter", "0ms"])
    .arg("--state-dir")
    .arg(dir.path().join("state"))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("agent.log")).unwrap());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("MESHFIT_")) {
        cmd.env_remove(k);
    }
    let mut agent = cmd.spawn().expect("starting agent");
    let log = || std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
    let started = wait_for(Duration::from_secs(20), || pid_file.exists());
    if !started {
        let _ = agent.kill();
        panic!("the agent started no calibration child in 20 s:\n{}", log());
    }
    let child = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&child), "child {child} not running");

    agent.kill().unwrap();
    agent.wait().unwrap();
    let gone = wait_for(Duration::from_secs(5), || !alive(&child));
    if !gone {
        let _ = Command::new("kill").args(["-KILL", &child]).status();
    }
    assert!(
        gone,
        "child {child} still running 5 s after the agent was killed:\n{}",
        log()
    );
}
