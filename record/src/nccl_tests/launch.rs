//! The lines around an nccl-tests table that say how it ran: the command line (a launcher's
//! job size and the binary's flags), the iteration count of the header, and the device lines.

use super::convention;

#[derive(Debug, Clone)]
pub(super) struct Device {
    pub(super) host: String,
    pub(super) index: u32,
    /// The GPU name nccl-tests prints after the bus id, e.g. `NVIDIA A100-SXM4-80GB`.
    pub(super) model: String,
}

/// What an `mpirun`/`srun` line says about the job's size.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Launch {
    /// Ranks: processes x GPUs per process x threads, when the processes are given.
    pub(super) ranks: Option<u32>,
    /// Nodes, when the line gives or implies them.
    pub(super) nodes: Option<u32>,
}

/// What a command line says: a launcher's job size and the binary's own flags.
pub(super) struct Command {
    pub(super) launch: Option<Launch>,
    /// Set when no launcher starts the binary: one process drives `-g` x `-t` GPUs (unset
    /// when that product is past u32).
    pub(super) single_process: Option<u32>,
    pub(super) iters: Option<u32>,
}

pub(super) const LAUNCHERS: &[&str] = &["mpirun", "mpiexec", "srun", "orterun", "prterun"];

/// Reads `[mpirun|srun ...] <name>_perf [flags]`. The launcher's flags come before the
/// binary and the binary's after it: `-n` is the process count of mpirun and srun but the
/// iteration count of nccl-tests.
pub(super) fn command_line(tokens: &[&str]) -> Option<Command> {
    // A shell prompt (`$`) or quoting around the command is not part of it.
    let tokens: Vec<String> = tokens
        .iter()
        .map(|t| t.trim_matches(|c| c == '`' || c == '$').to_string())
        .filter(|t| !t.is_empty())
        .collect();
    let at = tokens
        .iter()
        .position(|t| convention::binary(t).is_some())?;
    let first = tokens.first()?;
    let launcher = LAUNCHERS
        .iter()
        .find(|l| **l == first.rsplit('/').next().unwrap_or(first))
        .copied();
    if launcher.is_none() && at != 0 {
        return None;
    }
    let own = &tokens[at + 1..];
    // A product past u32 (`-g 5 -t 4294963648`) is no GPU count any machine has: read as
    // absent, like a 0, rather than overflowing (found by fuzzing).
    let per_process = flag(own, &["-g", "--ngpus"])
        .unwrap_or(1)
        .checked_mul(flag(own, &["-t", "--nthreads"]).unwrap_or(1));
    let iters = flag(own, &["-n", "--iters"]);
    let Some(launcher) = launcher else {
        return Some(Command {
            launch: None,
            single_process: per_process,
            iters,
        });
    };
    let before = &tokens[1..at];
    let (processes, nodes, per_node) = if launcher == "srun" {
        (
            flag(before, &["-n", "--ntasks"]),
            flag(before, &["-N", "--nodes"]),
            flag(before, &["--ntasks-per-node"]),
        )
    } else {
        // Open MPI's -N is processes per node; MPICH and Intel MPI spell it -ppn.
        let hosts = value(before, &["-H", "--host", "-host"])
            .map(|h| h.split(',').filter(|s| !s.is_empty()).count() as u32)
            .filter(|n| *n > 0);
        let ppr = value(before, &["--map-by", "-map-by"]).and_then(|m| {
            let mut parts = m.split(':');
            match (parts.next(), parts.next(), parts.next()) {
                // `ppr:0:node` places no process: absent, as a 0 count flag is, and never
                // a divisor below (found by fuzzing).
                (Some("ppr"), Some(n), Some("node")) => n.parse().ok().filter(|n| *n > 0),
                _ => None,
            }
        });
        (
            flag(before, &["-np", "-n", "--np", "-c"]),
            hosts,
            flag(
                before,
                &["-N", "-npernode", "--npernode", "-ppn", "--ppn", "-perhost"],
            )
            .or(ppr),
        )
    };
    let processes = processes.or_else(|| nodes?.checked_mul(per_node?));
    let nodes = nodes.or_else(|| Some(processes?.div_ceil(per_node?)));
    Some(Command {
        launch: Some(Launch {
            ranks: processes
                .zip(per_process)
                .and_then(|(p, g)| p.checked_mul(g)),
            nodes,
        }),
        single_process: None,
        iters,
    })
}

/// The value of `name V` or `name=V`.
fn value<'a>(tokens: &'a [String], names: &[&str]) -> Option<&'a str> {
    tokens.iter().enumerate().find_map(|(i, t)| {
        if names.contains(&t.as_str()) {
            return tokens.get(i + 1).map(String::as_str);
        }
        let (name, v) = t.split_once('=')?;
        names.contains(&name).then_some(v)
    })
}

/// A count flag's value. Every count on these lines (processes, nodes, GPUs, threads,
/// iterations) is at least 1; a 0 says nothing about the run (nccl-tests and the launchers
/// refuse it), so it is read as absent rather than as a 0-rank group (found by fuzzing).
fn flag(tokens: &[String], names: &[&str]) -> Option<u32> {
    value(tokens, names)?.parse().ok().filter(|n| *n > 0)
}

/// The timed iteration count of an nccl-tests header, which also prints `warmup iters:` and
/// `agg iters:`.
pub(super) fn header_iters(tokens: &[&str]) -> Option<u32> {
    let at = (1..tokens.len())
        .find(|&i| tokens[i] == "iters:" && !["warmup", "agg"].contains(&tokens[i - 1]))?;
    tokens.get(at + 1)?.parse().ok()
}

/// `Rank 0 Group 0 Pid 1478709 on gpu23 device 0 [0x31] NVIDIA A40` (Group is absent in old logs).
pub(super) fn read_device(tokens: &[&str]) -> Option<Device> {
    let host = tokens.get(tokens.iter().position(|t| *t == "on")? + 1)?;
    let at = tokens.iter().position(|t| *t == "device")?;
    let index = tokens.get(at + 1)?.parse().ok()?;
    let model = tokens
        .get(at + 2..)
        .map(|rest| {
            let skip = usize::from(rest.first().is_some_and(|t| t.starts_with('[')));
            rest[skip..].join(" ")
        })
        .unwrap_or_default();
    Some(Device {
        host: (*host).to_string(),
        index,
        model,
    })
}
