//! Facts the launcher prints, read whatever the framework: the GPU counts a reader's own
//! lines may not state.

use super::job::{state, Job};
use super::lines;

/// What launchers print, whatever the framework: DeepSpeed's launcher `num_local_procs=8` and
/// `dist_world_size=16`, torchrun's `--nproc_per_node=8` on a command line a script echoes.
pub(crate) fn facts(text: &str, job: &mut Job) {
    let marks = [
        "num_local_procs=",
        "dist_world_size=",
        "--nproc_per_node",
        "--nproc-per-node",
    ];
    if !marks.iter().any(|m| text.contains(m)) {
        return;
    }
    for line in lines::lines(text) {
        let t = &line.text;
        if !(t.contains('=') || t.contains("--nproc")) {
            continue;
        }
        if let Some(n) = lines::count_after(t, "num_local_procs=") {
            state(&mut job.cluster.gpus_per_node, n, line.number);
        }
        if let Some(n) = lines::count_after(t, "dist_world_size=") {
            state(&mut job.cluster.gpus, n, line.number);
        }
        for flag in ["--nproc_per_node", "--nproc-per-node"] {
            if let Some(n) = lines::count_after(t, flag) {
                state(&mut job.cluster.gpus_per_node, n, line.number);
            }
        }
    }
}
