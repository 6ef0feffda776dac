//! Runs a parsed command line: builds the backend and the plan, shows progress, prints tables
//! or JSON lines. Under a launcher with more than one rank, collective sweeps and `fabric`
//! run across the job (issue 12). Exit codes are [`crate::exit`]'s.

use crate::cli::{
    BackendChoice, Cli, CollectiveArgs, Command, FabricArgs, ImportArgs, Source, SweepArgs,
};
use crate::exit::{from_flags, partial, usage};
use anyhow::{anyhow, bail, Context, Result};
use clap::CommandFactory;
use indicatif::{ProgressBar, ProgressStyle};
use microbench::discovery::{self, matrix::Matrix, Topology};
use microbench::fabric::report::{findings, is_pair, pair_table};
use microbench::fabric::world::{self, Layout};
use microbench::fabric::{self, Job, FABRIC_MIN_NODES};
use microbench::kernels::{check_libraries, nccl_unique_id, nccl_version, JobRank, Library};
use microbench::launcher::{self, Placement};
use microbench::plan::Plan;
use microbench::rendezvous::{self, Hello, Meeting};
use microbench::sweep::{self, Calibration, Sweep};
use microbench::{report, sim, Backend, GpuBackend, SimBackend};
use record::manual;
use record::nccl_tests::{self, ImportOptions};
use record::{Kind, Record, Scope};

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Runs `cli`.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Import(args) => import(args, cli.json),
        Command::Topo => topo(&cli),
        Command::Completions { shell } => {
            emit(&manual::completions(Cli::command(), *shell))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            emit(&manual::man_pages(Cli::command(), dir.as_deref())?)?;
            Ok(ExitCode::SUCCESS)
        }
        _ => match placement(&cli)? {
            Some(placement) => job(&cli, &placement),
            None if matches!(cli.command, Command::Fabric(_)) => Err(usage(
                "fabric runs across a multi-node job, and no launcher variables here give a \
                 world of more than one rank: start one process per GPU under mpirun, srun, \
                 torchrun or a Kubernetes Indexed Job (see microbench --help)",
            )),
            None => measure(&cli),
        },
    }
}

/// This process's place in a multi-node job, if any.
fn placement(cli: &Cli) -> Result<Option<Placement>> {
    let host = hostname()?;
    let env = |name: &str| std::env::var(name).ok();
    Ok(launcher::detect(
        cli.job.launcher,
        &env,
        cli.job.node_name.as_deref(),
        &host,
    )?)
}

fn hostname() -> Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the host name from /proc/sys/kernel/hostname")?
        .trim()
        .to_string())
}

/// What a job measures: `fabric`, or one collective swept over every rank.
#[derive(Clone, Copy)]
enum Work<'a> {
    Fabric(&'a FabricArgs),
    Sweep(Kind, &'a CollectiveArgs),
}

/// One rank of a multi-node job: meet the others at the rendezvous; on the sim, rank 0
/// computes the records; under NCCL every rank measures its part and rank 0 builds the
/// records from every rank's loops. Rank 0 hands the records to every rank still in the job
/// and prints them; each node's local rank 0 writes its node's state file.
fn job(cli: &Cli, placement: &Placement) -> Result<ExitCode> {
    let whom = whom(placement);
    let work = match &cli.command {
        Command::Fabric(args) => Work::Fabric(args),
        c => match c.collective() {
            Some((_, args)) if args.gpus.is_some() || args.all_groups => {
                return Err(usage(format!(
                    "-g and --all-groups pick GPUs on one node; in a job ({whom}) the ranks on \
                     each node are the GPUs"
                )))
            }
            Some((kind, args)) => Work::Sweep(kind, args),
            None => {
                return Err(usage(format!(
                    "gemm, copy and calibrate run on one node, and this process is {whom}: \
                     run them with --launcher none"
                )))
            }
        },
    };
    if cli.source.nodes != 1 {
        return Err(usage(format!(
            "--nodes {}: in a job ({whom}) the nodes are the ranks' nodes",
            cli.source.nodes
        )));
    }
    let meeting = Meeting {
        addr: placement.master_addr.clone(),
        port: placement.master_port,
        timeout: cli.job.rendezvous_timeout,
    };
    let ran = match cli.source.backend {
        BackendChoice::Sim => sim_job(cli, placement, work, &meeting),
        BackendChoice::Nccl => nccl_job(cli, placement, work, &meeting),
    };
    ran.with_context(|| whom)
}

fn whom(placement: &Placement) -> String {
    format!(
        "rank {} of {} on {} ({})",
        placement.rank, placement.world, placement.node, placement.launcher
    )
}

/// Fewest nodes `work` needs: the pairwise pass is between nodes; a sweep runs on one node
/// too, as several processes on its GPUs.
fn min_nodes(work: Work) -> usize {
    match work {
        Work::Fabric(_) => FABRIC_MIN_NODES,
        Work::Sweep(..) => 1,
    }
}

/// What every rank says of itself at the rendezvous.
fn hello(cli: &Cli, placement: &Placement, backend: &str) -> Result<Hello> {
    Ok(Hello {
        rank: placement.rank,
        world: placement.world,
        local_rank: placement.local_rank,
        node: placement.node.clone(),
        host: hostname()?,
        busy: cli.source.busy.contains(&placement.local_rank),
        backend: backend.into(),
        profile: cli.source.profile.clone(),
        faults: cli.source.fault.iter().map(ToString::to_string).collect(),
        error: None,
    })
}

/// A job on the sim: rank 0 computes every node's records.
fn sim_job(cli: &Cli, placement: &Placement, work: Work, meeting: &Meeting) -> Result<ExitCode> {
    // Checked here, so a bad profile or fault stops this rank with its own flags named.
    let local = backend(&cli.source)?;
    let topology = local.topology()?;
    let gpus = topology.gpus.len() as u32;
    if placement.local_rank >= gpus {
        return Err(microbench::Error::NoSuchGpu {
            field: "local rank",
            gpu: placement.local_rank,
            count: gpus as usize,
        }
        .into());
    }
    let joined = rendezvous::join(meeting, hello(cli, placement, "sim")?, None)?;
    let job = Job::from_roster(&joined.roster, min_nodes(work))?;
    if placement.rank != 0 {
        return follow(placement, work, &job, joined);
    }
    let sim = job.sim(cli.source.seed)?;
    let outcome = match work {
        Work::Fabric(args) => fabric::run_sim(&sim, &job, &settings(args))?,
        Work::Sweep(kind, args) => {
            let gpus: Vec<u32> = (0..job.ranks_per_node).collect();
            let plan = Plan::collectives(
                kind,
                &[gpus],
                &sweep_of(&args.sweep),
                args.dtype,
                args.sweep.iters,
                args.sweep.warmup,
            )?;
            sim.run(&plan, &mut |_| {})?
        }
    };
    lead(cli, placement, work, &job, joined, outcome, &topology)
}

/// What a job rank needs to measure, checked before the rendezvous so that a rank that
/// cannot says why there, and the job ends at once on every rank instead of in NCCL's init.
struct Prepared {
    /// `None` when the GPU is busy: the rank leaves before NCCL's init.
    gpu: Option<GpuBackend>,
    busy: bool,
    versions: record::Versions,
    /// Rank 0's NCCL unique id.
    id: Option<Vec<u8>>,
    /// This node's GPUs, whose model names the records carry.
    topology: Topology,
}

fn prepare(placement: &Placement) -> Result<Prepared> {
    check_libraries(&[Library::Cuda, Library::Nccl])?;
    // NVML only: no CUDA context yet, which would show on the GPU as a process.
    let topology = discovery::discover()?;
    let gpu = placement.local_rank;
    if gpu as usize >= topology.gpus.len() {
        return Err(microbench::Error::NoSuchGpu {
            field: "local rank",
            gpu,
            count: topology.gpus.len(),
        }
        .into());
    }
    let busy = discovery::activity()?
        .iter()
        .any(|a| a.gpu == gpu && a.is_busy());
    let mut versions = topology.versions.clone();
    versions.nccl = nccl_version();
    Ok(Prepared {
        topology: topology.clone(),
        gpu: if busy {
            None
        } else {
            Some(GpuBackend::for_gpu(gpu)?)
        },
        busy,
        versions,
        id: if placement.rank == 0 {
            Some(nccl_unique_id()?)
        } else {
            None
        },
    })
}

/// A job on real GPUs under NCCL, as nccl-tests under mpirun: every rank runs the same steps
/// in the same order on its own GPU and times its own loops; rank 0 gathers them and builds
/// the records.
fn nccl_job(cli: &Cli, placement: &Placement, work: Work, meeting: &Meeting) -> Result<ExitCode> {
    reject_sim_flags(&cli.source)?;
    let prepared = prepare(placement);
    let mut hello = hello(cli, placement, "nccl")?;
    match &prepared {
        Ok(p) => hello.busy = p.busy,
        Err(e) => hello.error = Some(format!("{e:#}")),
    }
    let id = prepared.as_ref().ok().and_then(|p| p.id.clone());
    let mut joined = rendezvous::join(meeting, hello, id)?;
    // Every rank that arrived is ready (the rendezvous ends the job otherwise).
    let prepared = prepared?;
    let job = Job::from_roster(&joined.roster, min_nodes(work))?;
    let layout = Layout::new(&job, &joined.roster);
    let plan = match work {
        Work::Fabric(args) => {
            let s = settings(args);
            RankPlan {
                steps: world::fabric_steps(&job, &layout, &s)?,
                dtype: s.dtype,
                timing: (s.iters, s.warmup),
            }
        }
        Work::Sweep(kind, args) => RankPlan {
            steps: world::sweep_steps(kind, &layout, &sweep_of(&args.sweep), args.dtype)?,
            dtype: args.dtype,
            timing: (args.sweep.iters, args.sweep.warmup),
        },
    };
    let me = layout.nccl_rank(placement.rank);
    if placement.rank != 0 && me.is_none() {
        return follow(placement, work, &job, joined);
    }
    let mine = match (me, prepared.gpu.as_ref()) {
        (Some(me), Some(gpu)) => {
            let rank = RankOf {
                gpu,
                local_rank: placement.local_rank,
                me,
                timeout: cli.job.rendezvous_timeout,
            };
            rank.measure(&joined.roster, &layout, &plan)
        }
        (Some(me), None) => Err(anyhow!(
            "NCCL rank {me}: its GPU was busy at the rendezvous, yet its node is in the job"
        )),
        // Rank 0 of a node that left: it takes no part in NCCL and only gathers.
        (None, _) => Ok(Vec::new()),
    };
    let mine = match mine {
        Ok(loops) => loops,
        Err(e) => {
            // Rank 0 learns why from this rank instead of waiting for its timings; rank 0's
            // own failure closes its connections, which ends the others' wait. Either way
            // this rank's error is the one it reports, so a failed send is not.
            if placement.rank != 0 {
                let _ = joined.gather::<world::RankLoops>(
                    placement.rank,
                    Err(format!("{e:#}")),
                    |_| false,
                );
            }
            return Err(e);
        }
    };
    let filter = |r| layout.nccl_rank(r).is_some();
    let Some(results) = joined.gather(placement.rank, Ok(mine), filter)? else {
        return follow(placement, work, &job, joined);
    };
    let stamp = world::Stamp {
        node: job.nodes[0].name.clone(),
        versions: prepared.versions,
        dtype: plan.dtype,
        iters: plan.timing.0,
        timestamp: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok(),
    };
    let records = world::records(&plan.steps, &job, &layout, &results, &stamp)?;
    let outcome = microbench::Outcome {
        records,
        failures: Vec::new(),
    };
    lead(
        cli,
        placement,
        work,
        &job,
        joined,
        outcome,
        &prepared.topology,
    )
}

/// The steps every rank of an NCCL job runs, with the type and (iterations, warm-up).
struct RankPlan {
    steps: Vec<world::Step>,
    dtype: record::Dtype,
    timing: (u32, u32),
}

/// This process as a rank of an NCCL job.
struct RankOf<'a> {
    gpu: &'a GpuBackend,
    local_rank: u32,
    /// NCCL rank.
    me: u32,
    /// For NCCL's init and split.
    timeout: Duration,
}

impl RankOf<'_> {
    /// Joins the communicator (and, when a step needs it, the one-GPU-per-node split) and runs
    /// the steps.
    fn measure(
        &self,
        roster: &rendezvous::Roster,
        layout: &Layout,
        plan: &RankPlan,
    ) -> Result<world::RankLoops> {
        let id = roster
            .nccl_id
            .as_deref()
            .ok_or_else(|| anyhow!("rank 0 handed out no NCCL unique id"))?;
        let needs_split = plan.steps.iter().any(|s| {
            matches!(
                s,
                world::Step::Point {
                    over: world::Over::OnePerNode,
                    ..
                }
            )
        });
        let color = needs_split.then(|| world::split_color(self.local_rank));
        let mut rank = JobRank::join(
            self.gpu,
            self.local_rank,
            (self.me, layout.world()),
            id,
            color,
            self.timeout,
        )?;
        Ok(rank.run(&plan.steps, layout, self.me, plan.dtype, plan.timing)?)
    }
}

/// A rank other than 0 once it has done its part: waits for rank 0's records and, as its
/// node's local rank 0 in `fabric`, writes its node's state file. A rank of a skipped node
/// leaves at once.
fn follow(
    placement: &Placement,
    work: Work,
    job: &Job,
    joined: rendezvous::Rendezvous,
) -> Result<ExitCode> {
    if !job.includes(placement.rank) {
        eprintln!(
            "microbench: {}: a GPU on this node is busy; the node leaves the job",
            whom(placement)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let records: Vec<Record> = joined.finish(None, |_| true)?.unwrap_or_default();
    if let (Work::Fabric(args), 0) = (work, placement.local_rank) {
        write_state(args, &placement.node, &records)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Rank 0 with the job's records: hands them to every rank still in the job, writes its
/// node's state file and `--out`, prints the records and, for `fabric`, the pair table and
/// the slow nodes, NICs and pairs.
fn lead(
    cli: &Cli,
    placement: &Placement,
    work: Work,
    job: &Job,
    joined: rendezvous::Rendezvous,
    mut outcome: microbench::Outcome,
    topology: &Topology,
) -> Result<ExitCode> {
    outcome.records = with_gpu_models(&outcome.records, topology);
    // Every collective over all ranks or one per node spans every node that runs.
    let names: Vec<String> = job.nodes.iter().map(|n| n.name.clone()).collect();
    for r in &mut outcome.records {
        if r.group.scope == Scope::InterNode && !is_pair(r) {
            r.detail.nodes = Some(names.clone());
        }
    }
    for (node, ranks) in &job.skipped {
        eprintln!("microbench: skipped node {node}: GPU busy on rank {ranks:?}");
    }
    joined.finish(Some(&outcome.records), |rank| job.includes(rank))?;
    for f in &outcome.failures {
        eprintln!("microbench: skipped {}: {}", f.point, f.error);
    }
    match work {
        Work::Fabric(args) => {
            if job.includes(placement.rank) && placement.local_rank == 0 {
                write_state(args, &placement.node, &outcome.records)?;
            }
            if let Some(out) = &args.out {
                write_atomically(out, &json_lines(&outcome.records)?)?;
            }
            let report: String = findings(&outcome.records)
                .iter()
                .map(|f| format!("{f}\n"))
                .collect();
            if cli.json {
                emit(&json_lines(&outcome.records)?)?;
                eprint!("{report}");
            } else {
                let (pairs, wide): (Vec<Record>, Vec<Record>) =
                    outcome.records.iter().cloned().partition(is_pair);
                print_records(&wide, false)?;
                emit(&(pair_table(&pairs) + &report))?;
            }
        }
        Work::Sweep(..) => print_records(&outcome.records, cli.json)?,
    }
    Ok(partial(!outcome.failures.is_empty()))
}

fn settings(args: &FabricArgs) -> fabric::Settings {
    fabric::Settings {
        sweep: Sweep {
            min_bytes: args.min_bytes,
            max_bytes: args.max_bytes,
            factor: args.factor,
            increment: 0,
        },
        dtype: args.dtype,
        iters: args.iters,
        warmup: args.warmup,
    }
}

/// `DIR/fabric.jsonl` of `node`: the job-wide records and the pairs `node` is an end of.
fn write_state(args: &FabricArgs, node: &str, records: &[Record]) -> Result<()> {
    let Some(dir) = &args.state_dir else {
        return Ok(());
    };
    let mine: Vec<Record> = records
        .iter()
        .filter(|r| match &r.detail.peer_node {
            Some(peer) => peer == node || r.group.node.as_deref() == Some(node),
            None => true,
        })
        .cloned()
        .collect();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_atomically(&dir.join("fabric.jsonl"), &json_lines(&mine)?)
}

/// Writes through a temporary file and a rename, so the agent never reads half a file.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{}: not a file name", path.display()))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))
}

fn backend(src: &Source) -> Result<Box<dyn Backend>> {
    match src.backend {
        BackendChoice::Nccl => {
            reject_sim_flags(src)?;
            Ok(Box::new(GpuBackend::new()?))
        }
        BackendChoice::Sim => {
            let name = src.profile.as_deref().ok_or_else(|| {
                let names: Vec<&str> = sim::profiles().iter().map(|p| p.name).collect();
                usage(format!(
                    "--backend sim needs --profile: one of {}",
                    names.join(", ")
                ))
            })?;
            let profile = sim::profile(name).map_err(from_flags)?;
            let mut node =
                SimBackend::new(profile, src.fault.clone(), src.seed).map_err(from_flags)?;
            node.set_busy(&src.busy).map_err(from_flags)?;
            node.set_nodes(src.nodes).map_err(from_flags)?;
            node.set_point_delay(Duration::from_millis(src.sim_point_delay_ms));
            if let Some(dir) = &src.sim_processes {
                node.hold_gpus(&sim::ProcessTable::new(dir, src.sim_pid_offset))?;
            }
            Ok(Box::new(node))
        }
    }
}

fn reject_sim_flags(src: &Source) -> Result<()> {
    if src.profile.is_some()
        || !src.fault.is_empty()
        || !src.busy.is_empty()
        || src.sim_point_delay_ms > 0
        || src.sim_processes.is_some()
    {
        return Err(usage(
            "--profile, --fault, --busy and --sim-* apply to --backend sim only",
        ));
    }
    if src.nodes != 1 {
        return Err(usage(format!(
            "--nodes {} applies to --backend sim only: for a real multi-node sweep, start \
             microbench under a launcher, one process per GPU (see microbench --help)",
            src.nodes
        )));
    }
    Ok(())
}

fn topo(cli: &Cli) -> Result<ExitCode> {
    let topology = match cli.source.backend {
        // Discovery needs NVML only, not the CUDA libraries.
        BackendChoice::Nccl => {
            reject_sim_flags(&cli.source)?;
            discovery::discover()?
        }
        BackendChoice::Sim => backend(&cli.source)?.topology()?,
    };
    for note in &topology.notes {
        eprintln!("microbench: topo: {note}");
    }
    if cli.json {
        /// The topology document, led by its schema version (raised when a field is removed,
        /// renamed or changes meaning; issue 11).
        #[derive(serde::Serialize)]
        struct Versioned<'a> {
            schema_version: u32,
            #[serde(flatten)]
            topology: &'a Topology,
        }
        let doc = Versioned {
            schema_version: 1,
            topology: &topology,
        };
        emit(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    } else {
        emit(&(Matrix::from(&topology).render() + &report::gpu_details(&topology)))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep_of(args: &SweepArgs) -> Sweep {
    Sweep {
        min_bytes: args.min_bytes,
        max_bytes: args.max_bytes,
        factor: args.factor,
        increment: args.increment,
    }
}

fn check_group(size: usize, found: usize, what: &str) -> Result<()> {
    if size == 0 {
        return Err(usage(format!("-g 0: expected 1 to {found} GPUs")));
    }
    if size > found {
        return Err(microbench::Error::TooFewGpus {
            what: format!("{what} -g {size}"),
            needed: size,
            found,
        }
        .into());
    }
    Ok(())
}

fn all_gpus(t: &Topology, chosen: &[u32]) -> Vec<u32> {
    if chosen.is_empty() {
        (0..t.gpus.len() as u32).collect()
    } else {
        chosen.to_vec()
    }
}

fn plan(command: &Command, t: &Topology) -> Result<Plan> {
    let n = t.gpus.len();
    if let Some((kind, args)) = command.collective() {
        let sizes = if args.all_groups {
            sweep::group_sizes(n)
        } else {
            vec![args.gpus.unwrap_or(n)]
        };
        for &size in &sizes {
            check_group(size, n, kind.as_str())?;
        }
        let groups: Vec<Vec<u32>> = sizes.iter().flat_map(|&s| sweep::groups(t, s)).collect();
        return Plan::collectives(
            kind,
            &groups,
            &sweep_of(&args.sweep),
            args.dtype,
            args.sweep.iters,
            args.sweep.warmup,
        )
        .map_err(from_flags);
    }
    Ok(match command {
        Command::Gemm(args) => {
            let shapes = if args.shapes.is_empty() {
                sweep::default_gemm_shapes()
            } else {
                args.shapes.clone()
            };
            Plan::gemms(
                &all_gpus(t, &args.gpus),
                &shapes,
                &args.dtypes,
                &args.layouts,
                args.iters,
                args.warmup,
            )
        }
        Command::Copy(args) => Plan::copies(
            &sweep::copy_paths(&args.paths, &all_gpus(t, &args.gpus)),
            &sweep_of(&args.sweep),
            args.sweep.iters,
            args.sweep.warmup,
        )
        .map_err(from_flags)?,
        Command::Calibrate(args) => {
            let calibration = Calibration {
                sweep: sweep_of(&args.sweep),
                collective_dtype: args.dtype,
                gemm_dtypes: args.gemm_dtypes.clone(),
                iters: args.sweep.iters,
                warmup: args.sweep.warmup,
            };
            let (plan, lacking) = calibration.plan(t).map_err(from_flags)?;
            for d in lacking {
                eprintln!("microbench: calibrate: no {d} tensor cores on these GPUs; {d} GEMMs not measured");
            }
            plan
        }
        // Collectives returned above; topo and import do not measure.
        _ => bail!("not a measurement command"),
    })
}

fn measure(cli: &Cli) -> Result<ExitCode> {
    let node = backend(&cli.source)?;
    let topology = node.topology()?;
    let plan = plan(&cli.command, &topology)?;
    let bar = (!cli.json && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(plan.points.len() as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} points {elapsed}") {
            bar.set_style(style);
        }
        bar
    });
    // JSON lines leave as each point finishes, so a reader (the agent, issue 10) keeps what
    // was measured when it has to stop this process mid-run.
    let mut streamed = Ok(());
    let outcome = node.run(&plan, &mut |p| {
        if let Some(bar) = &bar {
            bar.set_position(p.done as u64);
        }
        if cli.json && streamed.is_ok() {
            let named = with_gpu_models(p.records, &topology);
            streamed = json_lines(&named).and_then(|text| emit(&text));
        }
        if let Some(f) = p.failure {
            eprintln!("microbench: skipped {}: {}", f.point, f.error);
        }
    })?;
    streamed?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !cli.json {
        print_records(&outcome.records, false)?;
    }
    Ok(partial(!outcome.failures.is_empty()))
}

/// `records` with the model of the GPU each ran on (its first), so that a file of them says
/// which GPU it measured without a snapshot around it.
fn with_gpu_models(records: &[Record], topology: &Topology) -> Vec<Record> {
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.detail.gpu_model = r
                .group
                .gpus
                .first()
                .and_then(|i| topology.gpus.iter().find(|g| g.index == *i))
                .map(|g| g.name.clone());
            r
        })
        .collect()
}

fn import(args: &ImportArgs, json: bool) -> Result<ExitCode> {
    let opts = ImportOptions {
        collective: args.collective.map(|c| c.0),
        ranks: args.ranks,
        scope: args.scope,
        node: args.node.clone(),
    };

    let mut records = Vec::new();
    let mut failed = 0;
    for file in &args.files {
        let name = file.display();
        // InputError names the file and says why; `reading` keeps the message's old shape.
        let file_name = file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let parsed = record::read_bounded(file, record::MAX_LOG_BYTES)
            .map_err(|e| anyhow::anyhow!("reading {e}"))
            .and_then(|text| {
                record::import::import(&text, &file_name, &opts).with_context(|| name.to_string())
            });
        match parsed {
            Ok(parsed) => {
                for w in &parsed.notes {
                    eprintln!("microbench: {name}: {w}");
                }
                records.extend(parsed.records);
            }
            Err(err) => {
                eprintln!("microbench: {err:#}");
                failed += 1;
            }
        }
    }
    if failed == args.files.len() {
        return Ok(ExitCode::from(1));
    }
    print_records(&records, json)?;
    Ok(partial(failed > 0))
}

fn print_records(records: &[Record], json: bool) -> Result<()> {
    if json {
        return emit(&json_lines(records)?);
    }
    let mut out = String::new();
    let collectives: Vec<Record> = records
        .iter()
        .filter(|r| r.kind.is_collective())
        .cloned()
        .collect();
    if !collectives.is_empty() {
        out.push_str(&nccl_tests::write(&collectives)?);
    }
    let gemms: Vec<&Record> = records.iter().filter(|r| r.kind == Kind::Gemm).collect();
    if !gemms.is_empty() {
        out.push_str(&report::gemm_table(&gemms));
    }
    let attention: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == Kind::Attention)
        .collect();
    if !attention.is_empty() {
        out.push_str(&report::attention_table(&attention));
    }
    let copies: Vec<&Record> = records
        .iter()
        .filter(|r| !r.kind.is_collective() && !matches!(r.kind, Kind::Gemm | Kind::Attention))
        .collect();
    if !copies.is_empty() {
        out.push_str(&report::copy_table(&copies));
        out.push_str(&report::p2p_matrix(&copies));
    }
    out.push_str(&report::summary(records));
    emit(&out)
}

/// One JSON line per record.
fn json_lines(records: &[Record]) -> Result<String> {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r)?);
        out.push('\n');
    }
    Ok(out)
}

/// Writes to stdout; a closed pipe (`| head`) ends output quietly instead of panicking.
fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("writing to stdout")?),
    }
}
