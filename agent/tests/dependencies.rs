//! The agent never loads CUDA, cuBLAS or NCCL: it cannot, because the kernel code is not in
//! its build (issue 10). Its calibration runs the `microbench` binary as a child.

use std::process::Command;

/// `cargo tree` of the agent's normal dependencies with `extra` flags, one package per line.
fn tree(extra: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "agent",
            "-e",
            "normal",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_agent_build_has_no_gpu_kernels_and_no_microbench_cli() {
    let packages = tree(&[]);
    assert!(packages.iter().any(|p| p == "microbench"), "{packages:?}");
    for banned in ["cudarc", "indicatif"] {
        assert!(
            !packages.iter().any(|p| p == banned),
            "{banned} is in the agent's dependency tree: {packages:?}"
        );
    }
    // The agent parses its own flags with clap; microbench's flags stay in its binary.
    let clap_users = tree(&["--invert", "clap", "--depth", "1"]);
    assert!(
        !clap_users.iter().any(|p| p == "microbench"),
        "microbench pulls clap into the agent: {clap_users:?}"
    );
}
