//! Command-line flags: nccl-tests' for sweeps (`-b -e -f -i -n -w -g -d`), plus the backend,
//! sim profile and faults, `--json`, and how a rank joins a multi-node job (issue 12).

use crate::exit::EXIT_STATUS;
use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use microbench::kernels::MAX_ITERS;
use microbench::launcher;
use microbench::sim::{Fault, MAX_NODES};
use microbench::sweep::{parse_size, CopyKind};
use record::{Dtype, GemmLayout, Kind, Scope};

/// The three launch recipes of a multi-node run, shown by `--help` (issue 12).
const RECIPES: &str = "\
Multi-node (one process per GPU, each seeing all its node's GPUs and taking the one of its
local rank; rank, world and node come from the launcher, rank 0 serves the rendezvous at
MASTER_ADDR:MASTER_PORT, default port 29500):
  mpirun:  mpirun -np 16 -npernode 8 -H gpu-a,gpu-b -x MASTER_ADDR=gpu-a -x MASTER_PORT=29500 \\
             microbench fabric --out fabric.jsonl
  Slurm:   srun -N 2 --ntasks-per-node 8 --gpus-per-node 8 --gpu-bind=none env \\
             MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -1) \\
             microbench fabric --out fabric.jsonl
  k8s:     Indexed Job of one pod per node (the chart's calibration.fabric), each pod starting
             one process per GPU with JOB_COMPLETION_INDEX (set by Kubernetes)
             MESHFIT_WORLD_SIZE=<pods x GPUs> MESHFIT_RANKS_PER_POD=<GPUs>
             MESHFIT_LOCAL_RANK=<0..GPUs-1> MASTER_ADDR=<job>-0.<headless service> MASTER_PORT=29500
             MESHFIT_NODE_NAME=<spec.nodeName> MESHFIT_STATE_DIR=/var/lib/meshfit-agent
             MESHFIT_JOB_ID=<job>
torchrun-style RANK, WORLD_SIZE, LOCAL_RANK work as they are; --launcher none runs alone.
Rank 0 listens on IPv6 and IPv4 (MASTER_ADDR may be either; a loopback address listens there
alone) and refuses a rank that does not present the job's id: --job-id, else MESHFIT_JOB_ID,
else the launcher's own (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, PMIX_NAMESPACE).";

/// Node discovery and kernel timing: NVML topology, GEMM, NCCL collectives and copies, with
/// nccl-tests compatible text in and out.
#[derive(Debug, Parser)]
#[command(name = "microbench", version, about, after_help = format!("{RECIPES}\n\n{EXIT_STATUS}"))]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
    /// Where numbers come from.
    #[command(flatten)]
    pub source: Source,
    /// Output of every subcommand: text (nccl-tests tables, the link matrix, one line per
    /// library) or json (measurement records as JSON lines; topology and libraries as one
    /// document each), as the other meshfit binaries' --format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The same as --format json.
    #[arg(long, global = true)]
    pub json: bool,
    /// How this process joins a multi-node job.
    #[command(flatten)]
    pub job: JobArgs,
}

/// Where a rank finds its job.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Read rank, world size and node from: auto (the first of torchrun, slurm, mpi, k8s
    /// whose variables are set), none (run alone), slurm, mpi, k8s, torchrun. With a world of
    /// more than one rank, collective sweeps and `fabric` run across the job.
    #[arg(long, global = true, value_parser = parse_launcher, default_value = "auto")]
    pub launcher: launcher::Choice,
    /// This rank's node, instead of the launcher's (also MESHFIT_NODE_NAME): the Kubernetes
    /// node name, or several sim nodes on one machine.
    #[arg(long, global = true)]
    pub node_name: Option<String>,
    /// The job's id, which every rank presents at the rendezvous and rank 0 checks, refusing
    /// a rank of another job (also MESHFIT_JOB_ID). Default: the launcher's own,
    /// TORCHELASTIC_RUN_ID (torchrun's --rdzv-id), SLURM_JOB_ID, PMIX_NAMESPACE (Open MPI);
    /// a Kubernetes Indexed Job has none, and the chart sets MESHFIT_JOB_ID to the Job's name.
    #[arg(long, global = true)]
    pub job_id: Option<String>,
    /// Seconds to wait for every rank at the rendezvous; the job ends naming the ranks that
    /// did not arrive.
    #[arg(long, global = true, value_parser = parse_seconds, default_value = "120")]
    pub rendezvous_timeout: std::time::Duration,
}

/// The backend and, for the sim, its node.
#[derive(Debug, Args)]
pub struct Source {
    /// `nccl`: this node's GPUs (NVML, CUDA, cuBLAS, NCCL); `sim`: a model of --profile.
    #[arg(long, global = true, value_enum, default_value_t = BackendChoice::Nccl, env = "MICROBENCH_BACKEND")]
    pub backend: BackendChoice,
    /// Sim node profile: dgx-h100, hgx-h200, gb200-nvl72 (a 4-GPU tray; 18 consecutive
    /// nodes of a job share one 72-GPU NVLink domain), dgx-a100, l40s-pcie, dgx1-v100.
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// Sim fault, repeatable: nvlink-degraded:gpu=N, slow-gpu:gpu=N,factor=F,
    /// pcie-downtrained:gpu=N, nic-down:nic=N, fabric-slow:factor=F; and for tests of a
    /// caller, hang:after=N and panic:after=N (the point after the first N hangs or panics).
    #[arg(long, global = true, value_parser = parse_fault)]
    pub fault: Vec<Fault>,
    /// Sim noise seed; the same seed gives the same numbers.
    #[arg(long, global = true, default_value_t = 0)]
    pub seed: u64,
    /// Sim GPUs busy with another job (comma-separated indices).
    #[arg(long, global = true, value_delimiter = ',')]
    pub busy: Vec<u32>,
    /// Sim collectives across this many identical nodes (inter-node records, as nccl-tests
    /// under mpirun), 1 to 16384: 131,072 GPUs at 8 a node, past the largest training
    /// clusters built. For real multi-node sweeps start microbench under a launcher (below),
    /// or read nccl-tests logs with `import`.
    #[arg(long, global = true, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_NODES)))]
    pub nodes: u32,
    /// Sim wall time per point in milliseconds, as a real kernel takes.
    #[arg(long, global = true, default_value_t = 0)]
    pub sim_point_delay_ms: u64,
    /// Sim GPU process table: this run holds every GPU there while it lives, as NVML would
    /// report it (the agent reads it).
    #[arg(long, global = true)]
    pub sim_processes: Option<std::path::PathBuf>,
    /// Sim: the driver reports PIDs shifted by this much, as from another PID namespace.
    #[arg(long, global = true, default_value_t = 0, requires = "sim_processes")]
    pub sim_pid_offset: u32,
}

/// `--backend` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// This node's GPUs.
    Nccl,
    /// The physical model.
    Sim,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the GPU link matrix like `nvidia-smi topo -m`, GPU and NIC details.
    Topo,
    /// Which NVML, CUDA driver, cuBLASLt and NCCL files load, under which name and path, their
    /// versions, and every symbol microbench calls that one lacks; needs no GPU. Exits 0 only
    /// when every library the GPU paths need is usable, 1 otherwise. NVIDIA's pip wheels
    /// are found through LD_LIBRARY_PATH (e.g. site-packages/nvidia/nccl/lib).
    Libs,
    /// NCCL all-reduce sweep (nccl-tests all_reduce_perf).
    #[command(alias = "all_reduce")]
    AllReduce(CollectiveArgs),
    /// NCCL all-gather sweep (all_gather_perf).
    #[command(alias = "all_gather")]
    AllGather(CollectiveArgs),
    /// NCCL reduce-scatter sweep (reduce_scatter_perf).
    #[command(alias = "reduce_scatter")]
    ReduceScatter(CollectiveArgs),
    /// All-to-all as grouped send/recv (alltoall_perf).
    #[command(alias = "all_to_all")]
    AllToAll(CollectiveArgs),
    /// Send/recv in a ring (sendrecv_perf).
    #[command(alias = "send_recv")]
    SendRecv(CollectiveArgs),
    /// GEMM throughput.
    Gemm(GemmArgs),
    /// Copy bandwidth: peer-to-peer matrix, host to device, device to host, within HBM.
    Copy(CopyArgs),
    /// Everything: every collective over every TP/EP group size, GEMMs and copies. With
    /// --json each point's records leave as it finishes. The agent runs this as its child,
    /// with MESHFIT_CALIBRATION_RUN set so it knows its own GPU processes.
    Calibrate(CalibrateArgs),
    /// Read nccl-tests logs into measurement records.
    Import(ImportArgs),
    /// Multi-node calibration, one process per GPU under a launcher (see below): all-reduce,
    /// all-gather, reduce-scatter and all-to-all over all ranks and over one GPU per node,
    /// then a pairwise node-to-node send/recv pass rail by rail (GPU i to GPU i, through
    /// NIC i), in round-robin rounds, naming the slow node, NIC or pair. A rank whose GPU is
    /// busy takes its node out of the job; at least 2 nodes must remain.
    #[command(after_help = RECIPES)]
    Fabric(FabricArgs),
    /// Print a shell completion script, e.g. `microbench completions bash >
    /// /etc/bash_completion.d/microbench`.
    Completions {
        /// The shell.
        shell: record::manual::Shell,
    },
    /// Print the man page (roff), e.g. `microbench man > /usr/local/share/man/man1/microbench.1`.
    Man {
        /// Write microbench.1 and one page per subcommand (microbench-import.1, ...) into this
        /// directory instead.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

/// How a subcommand prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people (`table`, the tuner's name for it, is taken too).
    #[value(alias = "table")]
    Text,
    /// For scripts.
    Json,
}

impl Cli {
    /// True when the output is JSON: `--format json`, or its alias `--json`.
    pub fn json(&self) -> bool {
        self.json || self.format == Format::Json
    }
}

/// A collective named by a flag. The subcommand's spelling (`all-reduce`) is canonical and
/// shown in help; the records' and nccl-tests' (`all_reduce`) is accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collective(pub Kind);

impl ValueEnum for Collective {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Collective(Kind::AllReduce),
            Collective(Kind::AllGather),
            Collective(Kind::ReduceScatter),
            Collective(Kind::AllToAll),
            Collective(Kind::SendRecv),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let name = match self.0 {
            Kind::AllReduce => "all-reduce",
            Kind::AllGather => "all-gather",
            Kind::ReduceScatter => "reduce-scatter",
            Kind::AllToAll => "all-to-all",
            Kind::SendRecv => "send-recv",
            _ => return None,
        };
        Some(PossibleValue::new(name).alias(self.0.as_str()))
    }
}

impl Command {
    /// The collective a sweep subcommand measures.
    pub fn collective(&self) -> Option<(Kind, &CollectiveArgs)> {
        match self {
            Command::AllReduce(a) => Some((Kind::AllReduce, a)),
            Command::AllGather(a) => Some((Kind::AllGather, a)),
            Command::ReduceScatter(a) => Some((Kind::ReduceScatter, a)),
            Command::AllToAll(a) => Some((Kind::AllToAll, a)),
            Command::SendRecv(a) => Some((Kind::SendRecv, a)),
            _ => None,
        }
    }
}

/// nccl-tests' sweep flags.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Smallest size in bytes (K, M, G = 2^10, 2^20, 2^30).
    #[arg(short = 'b', long = "minbytes", value_parser = parse_size, default_value = "8")]
    pub min_bytes: u64,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", value_parser = parse_size, default_value = "8G")]
    pub max_bytes: u64,
    /// Multiply the size by this between points.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub factor: u64,
    /// Add this to the size between points (with -f 1).
    #[arg(short = 'i', long = "stepbytes", value_parser = parse_size, default_value = "0")]
    pub increment: u64,
    /// Timed iterations per point.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_ITERS)))]
    pub iters: u32,
    /// Untimed warm-up iterations per point.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_ITERS)))]
    pub warmup: u32,
}

/// Flags of a collective sweep.
#[derive(Debug, Clone, Args)]
pub struct CollectiveArgs {
    /// Sizes and iterations.
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// GPUs taking part (default: all). On a mesh, every group of this size the tuner's rank
    /// order forms is measured.
    #[arg(short = 'g', long = "ngpus")]
    pub gpus: Option<usize>,
    /// Sweep every TP/EP group size (2, 4, 8, ... all) instead of one.
    #[arg(long, conflicts_with = "gpus")]
    pub all_groups: bool,
    /// Element type, in nccl-tests' or meshfit's spelling (float, half, bfloat16, fp32, bf16, ...).
    #[arg(short = 'd', long = "datatype", value_parser = parse_dtype, default_value = "float")]
    pub dtype: Dtype,
}

/// GEMM flags.
#[derive(Debug, Clone, Args)]
pub struct GemmArgs {
    /// Operand types, comma-separated: bf16, fp16, tf32, fp8_e4m3.
    #[arg(long = "dtype", value_delimiter = ',', value_parser = parse_dtype, default_value = "bf16")]
    pub dtypes: Vec<Dtype>,
    /// Shapes MxNxK, comma-separated (default: squares 256..16384 and transformer TP shapes).
    #[arg(long = "shape", value_delimiter = ',', value_parser = parse_shape)]
    pub shapes: Vec<record::Gemm>,
    /// Layouts, comma-separated or repeated: tn (forward), nn (input gradient), nt (weight
    /// gradient); fp8 runs in tn only, other layouts fail as their points.
    #[arg(long = "layout", value_delimiter = ',', value_parser = parse_layout, default_value = "tn")]
    pub layouts: Vec<GemmLayout>,
    /// GPUs to run on, comma-separated (default: all).
    #[arg(long = "gpu", value_delimiter = ',')]
    pub gpus: Vec<u32>,
    /// Timed iterations.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_ITERS)))]
    pub iters: u32,
    /// Untimed warm-up iterations.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_ITERS)))]
    pub warmup: u32,
}

/// Copy flags.
#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    /// Paths, comma-separated: p2p, p2p-bidir, h2d, d2h, hbm.
    #[arg(long = "path", value_delimiter = ',', value_parser = parse_copy_kind, default_value = "p2p,p2p-bidir,h2d,d2h,hbm")]
    pub paths: Vec<CopyKind>,
    /// GPUs (default: all).
    #[arg(long = "gpu", value_delimiter = ',')]
    pub gpus: Vec<u32>,
    /// Sizes and iterations.
    #[command(flatten)]
    pub sweep: SweepArgs,
}

/// Calibration flags.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Sizes and iterations of the collective and copy sweeps.
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// GEMM operand types.
    #[arg(long = "gemm-dtype", value_delimiter = ',', value_parser = parse_dtype, default_value = "bf16,fp16,tf32,fp8_e4m3")]
    pub gemm_dtypes: Vec<Dtype>,
    /// Collective element type.
    #[arg(short = 'd', long = "datatype", value_parser = parse_dtype, default_value = "bf16")]
    pub dtype: Dtype,
}

/// Fabric flags; sizes are modest by default, as the pass crosses every node pair.
#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    /// Smallest size of the job-wide sweeps in bytes (K, M, G = 2^10, 2^20, 2^30).
    #[arg(short = 'b', long = "minbytes", value_parser = parse_size, default_value = "1M")]
    pub min_bytes: u64,
    /// Largest size of the job-wide sweeps, and the size of the pairwise pass.
    #[arg(short = 'e', long = "maxbytes", value_parser = parse_size, default_value = "64M")]
    pub max_bytes: u64,
    /// Multiply the size by this between points.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub factor: u64,
    /// Timed iterations per point.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_ITERS)))]
    pub iters: u32,
    /// Untimed warm-up iterations per point.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_ITERS)))]
    pub warmup: u32,
    /// Element type.
    #[arg(short = 'd', long = "datatype", value_parser = parse_dtype, default_value = "bf16")]
    pub dtype: Dtype,
    /// Global rank 0 writes every record here as JSON lines (what `tuner` reads).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Each node's local rank 0 writes DIR/fabric.jsonl: the job-wide records and the pairs
    /// its node is an end of (what the agent exports).
    #[arg(long, env = "MESHFIT_STATE_DIR")]
    pub state_dir: Option<std::path::PathBuf>,
}

/// Import flags.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// nccl-tests output files, or CSV tables: nccl-tests-shaped (vTrain's lookup tables),
    /// GEMM sweeps (m, n, k, dtype, layout, time or TFLOP/s), attention timings (batch, seq,
    /// heads, head_dim, causal, pass, time or TFLOP/s).
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// The collective, when the log does not name its *_perf binary; the records' spelling
    /// (all_reduce, ...) is accepted too.
    #[arg(long, value_enum)]
    pub collective: Option<Collective>,
    /// The rank count, when the log or the table's file name does not fix it.
    #[arg(long)]
    pub ranks: Option<u32>,
    /// intra_node or inter_node, when the log does not show it.
    #[arg(long, value_parser = parse_scope)]
    pub scope: Option<Scope>,
    /// The node's host name, when the log has no device list.
    #[arg(long)]
    pub node: Option<String>,
}

fn parse_launcher(s: &str) -> Result<launcher::Choice, String> {
    s.parse().map_err(|e: microbench::Error| e.to_string())
}

/// Whole or decimal seconds, above zero.
fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("`{s}`: expected seconds above 0, like 120 or 2.5"))
}

fn parse_copy_kind(s: &str) -> Result<CopyKind, String> {
    s.parse::<CopyKind>().map_err(|e| e.to_string())
}

fn parse_fault(s: &str) -> Result<Fault, String> {
    s.parse::<Fault>().map_err(|e| e.to_string())
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    s.parse::<Scope>().map_err(|e| e.to_string())
}

/// meshfit names, plus nccl-tests' (`float`, `half`, `bfloat16`, `double`, `fp8` for e4m3).
fn parse_dtype(s: &str) -> Result<Dtype, String> {
    let alias = match s {
        "float" => "fp32",
        "half" => "fp16",
        "bfloat16" => "bf16",
        "double" => "fp64",
        "fp8" | "f8e4m3" => "fp8_e4m3",
        "f8e5m2" => "fp8_e5m2",
        other => other,
    };
    alias.parse::<Dtype>().map_err(|e| e.to_string())
}

/// `tn`, `nn` or `nt`.
fn parse_layout(s: &str) -> Result<GemmLayout, String> {
    s.parse::<GemmLayout>().map_err(|e| e.to_string())
}

/// `MxNxK`, e.g. `8192x8192x8192`.
fn parse_shape(s: &str) -> Result<record::Gemm, String> {
    let dims: Vec<u64> = s
        .split('x')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| {
            format!("shape `{s}`: expected MxNxK with whole numbers, like 8192x8192x8192")
        })?;
    match dims[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok(record::Gemm { m, n, k }),
        _ => Err(format!(
            "shape `{s}`: expected MxNxK with three positive numbers"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn gemm_layouts_parse_comma_separated_or_repeated() {
        let layouts = |args: &[&str]| match Cli::try_parse_from(args) {
            Ok(Cli {
                command: Command::Gemm(g),
                ..
            }) => Ok(g.layouts),
            Ok(other) => panic!("not gemm: {other:?}"),
            Err(e) => Err(e.to_string()),
        };
        let (tn, nn, nt) = (GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt);
        assert_eq!(layouts(&["microbench", "gemm"]), Ok(vec![tn]));
        assert_eq!(
            layouts(&["microbench", "gemm", "--layout", "nn,nt", "--layout", "tn"]),
            Ok(vec![nn, nt, tn])
        );
        let err = layouts(&["microbench", "gemm", "--layout", "tt"]).unwrap_err();
        assert!(err.contains("layout `tt`: expected one of"), "{err}");
    }

    #[test]
    fn collectives_take_both_spellings_and_help_names_the_subcommands() {
        let cmd = Cli::command();
        for c in Collective::value_variants() {
            let value = c.to_possible_value().unwrap();
            let canonical = value.get_name();
            assert_eq!(canonical.replace('-', "_"), c.0.as_str());
            let sub = cmd.find_subcommand(canonical).expect(canonical);
            assert!(
                sub.get_all_aliases().any(|a| a == c.0.as_str()),
                "{canonical}"
            );
            for spelling in [canonical, c.0.as_str()] {
                let cli = Cli::try_parse_from(["microbench", spelling]).unwrap();
                assert_eq!(cli.command.collective().unwrap().0, c.0);
                let import = ["microbench", "import", "log.txt", "--collective", spelling];
                match Cli::try_parse_from(import).unwrap().command {
                    Command::Import(args) => assert_eq!(args.collective, Some(*c)),
                    other => panic!("not import: {other:?}"),
                }
            }
        }
        let err = Cli::try_parse_from(["microbench", "import", "l", "--collective", "gemm"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("all-reduce, all-gather, reduce-scatter, all-to-all, send-recv"),
            "{err}"
        );
    }

    #[test]
    fn nccl_tests_flags_parse() {
        let cli = Cli::try_parse_from([
            "microbench",
            "all-reduce",
            "-b",
            "8",
            "-e",
            "8G",
            "-f",
            "2",
            "-n",
            "20",
            "-w",
            "5",
            "-g",
            "4",
            "-d",
            "bfloat16",
        ])
        .unwrap();
        let (kind, args) = cli.command.collective().unwrap();
        assert_eq!(kind, Kind::AllReduce);
        assert_eq!(
            (args.sweep.max_bytes, args.gpus, args.dtype),
            (8 << 30, Some(4), Dtype::Bf16)
        );
        assert_eq!(parse_shape("1x2x3"), Ok(record::Gemm { m: 1, n: 2, k: 3 }));
        assert!(parse_shape("1x2").unwrap_err().contains("MxNxK"));
    }
}
