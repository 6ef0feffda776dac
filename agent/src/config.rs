//! Settings: each is a YAML key, a `--flag` and a `MESHFIT_*` environment variable.
//!
//! Each layer overrides the one before: [`Config::default`], the YAML file (`--config`), the
//! environment, the flags. The merged keys are checked once, where they become a [`Config`]
//! (the sim faults parsed into [`Fault`]s, so a bad one stops the start naming the key);
//! later code trusts it. `agent --print-config` prints the merged result as YAML.

use crate::bind::Listen;
use crate::error::{Error, Result};
use clap::{Parser, ValueEnum};
use microbench::sim::Fault;
use record::Dtype;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest configuration file read: every key set is about 1.5 KB, so 1 MiB is no
/// configuration (`--config /dev/zero` read until memory ran out; issue 31).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Most fabric pairs per rail `fabric_slowest_peers` may keep: 8 rails of 32 and the fastest
/// are 264 series, a quarter of what a node exports besides.
pub const MAX_SLOWEST_PEERS: u32 = 32;

/// Agent settings, checked. Every field is a YAML key, a `--flag` and a `MESHFIT_*` variable,
/// but for the groups, whose fields are.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where to serve: `:PORT` for every address of the host, IPv6 and IPv4 (the default
    /// `:9420`), or `ADDR:PORT` as given; port 0 picks a free one (the log says which).
    pub listen: Listen,
    /// Directory of the calibration state file.
    pub state_dir: PathBuf,
    /// The `hostname` label: the Kubernetes node name, else the host name.
    pub node_name: Option<String>,
    /// Time between calibrations.
    pub interval: Span,
    /// Up to this much is added at random to each wait, so nodes do not calibrate at once.
    pub jitter: Span,
    /// Wait before trying again when the GPUs were busy.
    pub busy_retry: Span,
    /// Time between live samples.
    pub sample_interval: Span,
    /// `nccl`: this node's GPUs through NVML, CUDA and NCCL; `sim`: a model of `profile`.
    pub backend: BackendKind,
    /// What only the sim reads.
    pub sim: SimConfig,
    /// The `microbench` binary that calibrates, as a child process; by default the one next
    /// to the agent's executable, else the first on `PATH`.
    pub microbench_bin: Option<PathBuf>,
    /// Where the agent reads a GPU process's environment to know its calibration child when
    /// the driver reports PIDs the agent does not share: `/proc` with `hostPID: true`, or the
    /// host's `/proc` mounted read-only.
    pub host_proc: PathBuf,
    /// Bearer token for `POST /v1/calibrate`; without one the endpoint answers 401.
    pub calibrate_token: Option<Secret>,
    /// When the GPUs are idle enough to calibrate.
    pub idle: IdleGate,
    /// Longest the calibration child may go without finishing a point; then it is stopped
    /// as hung.
    pub point_timeout: Span,
    /// Longest a whole calibration may take; then the child is stopped.
    pub run_timeout: Span,
    /// What bounds the HTTP server.
    pub http: HttpLimits,
    /// Smallest collective and copy size in bytes.
    pub min_bytes: u64,
    /// Largest collective and copy size in bytes.
    pub max_bytes: u64,
    /// Timed iterations per point.
    pub iters: u32,
    /// Untimed iterations before them.
    pub warmup: u32,
    /// Collective element type.
    pub dtype: Dtype,
    /// GEMM operand types (those the GPUs lack tensor cores for are skipped). By default the
    /// ones the tuner prices, bf16, fp16 and fp8: tf32 would add 64 series per 8-GPU node
    /// that nothing reads (issue 28's bound of about 1,000), and is there when asked for.
    pub gemm_dtypes: Vec<Dtype>,
    /// Fabric pairs exported per rail besides the fastest: the slowest peers. With each
    /// rail's median over all peers, this bounds the fabric series whatever the fleet size.
    pub fabric_slowest_peers: u32,
}

/// The sim backend's settings; backend `nccl` refuses each one set, but for `seed`, which it
/// ignores.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Node profile (`profile`).
    pub profile: Option<String>,
    /// Faults (`faults`), written like `slow-gpu:gpu=5,factor=0.7`.
    pub faults: Vec<Fault>,
    /// Noise seed (`seed`).
    pub seed: u64,
    /// GPUs busy with another job from the start (`busy`).
    pub busy: Vec<u32>,
    /// A file of comma-separated GPU indices busy with another job, read at every idle
    /// check, so a test can make a job appear mid-run (`busy_file`).
    pub busy_file: Option<PathBuf>,
    /// Time each point takes, as a real kernel would (`sim_point_delay`).
    pub point_delay: Span,
    /// The driver reports PIDs shifted by this much, as from another PID namespace (an agent
    /// in a container without `hostPID`; `sim_pid_offset`).
    pub pid_offset: u32,
}

/// The idle gate: what counts as busy before a run, and how often a run checks again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleGate {
    /// A GPU counts as idle up to this utilisation, in percent.
    pub max_utilization_percent: u32,
    /// A GPU counts as idle up to this share of its memory in use, 0 to 1.
    pub max_memory_used_ratio: f64,
    /// How often a running calibration checks that the GPUs are still idle.
    pub busy_check_interval: Span,
}

/// The HTTP server's limits (issue 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Longest an HTTP request may take.
    pub request_timeout: Span,
    /// HTTP connections open at once; at the cap a new one closes the one idle longest (one
    /// that never sent a request before a keep-alive one), so a scraper always gets in.
    pub max_connections: u32,
    /// Longest an HTTP request head may take from its first byte (from the connection
    /// opening, for its first request).
    pub header_read_timeout: Span,
    /// Longest a keep-alive HTTP connection waits for its next request; longer than the
    /// scrape interval, so Prometheus keeps its connection.
    pub idle_timeout: Span,
    /// Longest an HTTP response write may make no progress (a client that does not read).
    pub write_timeout: Span,
}

impl Default for Config {
    /// The only place defaults are written.
    fn default() -> Self {
        Config {
            listen: Listen::AnyHost(9420),
            state_dir: PathBuf::from("/var/lib/meshfit-agent"),
            node_name: None,
            interval: Span::from_secs(6 * 3600),
            jitter: Span::from_secs(600),
            busy_retry: Span::from_secs(300),
            sample_interval: Span::from_secs(5),
            backend: BackendKind::Nccl,
            sim: SimConfig {
                profile: None,
                faults: Vec::new(),
                seed: 0,
                busy: Vec::new(),
                busy_file: None,
                point_delay: Span::from_secs(0),
                pid_offset: 0,
            },
            microbench_bin: None,
            host_proc: PathBuf::from("/proc"),
            calibrate_token: None,
            idle: IdleGate {
                max_utilization_percent: 5,
                max_memory_used_ratio: 0.05,
                busy_check_interval: Span(Duration::from_millis(250)),
            },
            // The slowest point is an 8 GiB collective over PCIe: ~0.75 s an iteration, run as
            // microbench's 5 timed loops of 20 plus warm-up, ~160 s. A job appearing stops the
            // child within a second whatever this is; this only bounds a hang.
            point_timeout: Span::from_secs(300),
            run_timeout: Span::from_secs(3600),
            http: HttpLimits {
                request_timeout: Span::from_secs(5),
                max_connections: 512,
                header_read_timeout: Span::from_secs(10),
                idle_timeout: Span::from_secs(120),
                write_timeout: Span::from_secs(30),
            },
            min_bytes: 8,
            max_bytes: 8 << 30,
            iters: 20,
            warmup: 5,
            dtype: Dtype::Bf16,
            gemm_dtypes: vec![Dtype::Bf16, Dtype::Fp16, Dtype::Fp8E4m3],
            fabric_slowest_peers: 4,
        }
    }
}

/// The keys as the YAML file, the variables and the flags write them, flat and in the order
/// `--print-config` prints them; each means what its [`Config`] field says. Flat because
/// serde's `deny_unknown_fields`, which makes a mistyped key an error naming it, does not work
/// through `#[serde(flatten)]`: the groups are made by [`Keys::check`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Keys {
    listen: Listen,
    state_dir: PathBuf,
    node_name: Option<String>,
    interval: Span,
    jitter: Span,
    busy_retry: Span,
    sample_interval: Span,
    backend: BackendKind,
    profile: Option<String>,
    faults: Vec<String>,
    seed: u64,
    busy: Vec<u32>,
    busy_file: Option<PathBuf>,
    sim_point_delay: Span,
    sim_pid_offset: u32,
    microbench_bin: Option<PathBuf>,
    host_proc: PathBuf,
    calibrate_token: Option<Secret>,
    max_utilization_percent: u32,
    max_memory_used_ratio: f64,
    busy_check_interval: Span,
    point_timeout: Span,
    run_timeout: Span,
    request_timeout: Span,
    max_connections: u32,
    header_read_timeout: Span,
    idle_timeout: Span,
    write_timeout: Span,
    min_bytes: u64,
    max_bytes: u64,
    iters: u32,
    warmup: u32,
    dtype: Dtype,
    gemm_dtypes: Vec<Dtype>,
    fabric_slowest_peers: u32,
}

impl Default for Keys {
    fn default() -> Keys {
        Keys::from(&Config::default())
    }
}

impl From<&Config> for Keys {
    fn from(c: &Config) -> Keys {
        Keys {
            listen: c.listen,
            state_dir: c.state_dir.clone(),
            node_name: c.node_name.clone(),
            interval: c.interval,
            jitter: c.jitter,
            busy_retry: c.busy_retry,
            sample_interval: c.sample_interval,
            backend: c.backend,
            profile: c.sim.profile.clone(),
            faults: c.sim.faults.iter().map(Fault::to_string).collect(),
            seed: c.sim.seed,
            busy: c.sim.busy.clone(),
            busy_file: c.sim.busy_file.clone(),
            sim_point_delay: c.sim.point_delay,
            sim_pid_offset: c.sim.pid_offset,
            microbench_bin: c.microbench_bin.clone(),
            host_proc: c.host_proc.clone(),
            calibrate_token: c.calibrate_token.clone(),
            max_utilization_percent: c.idle.max_utilization_percent,
            max_memory_used_ratio: c.idle.max_memory_used_ratio,
            busy_check_interval: c.idle.busy_check_interval,
            point_timeout: c.point_timeout,
            run_timeout: c.run_timeout,
            request_timeout: c.http.request_timeout,
            max_connections: c.http.max_connections,
            header_read_timeout: c.http.header_read_timeout,
            idle_timeout: c.http.idle_timeout,
            write_timeout: c.http.write_timeout,
            min_bytes: c.min_bytes,
            max_bytes: c.max_bytes,
            iters: c.iters,
            warmup: c.warmup,
            dtype: c.dtype,
            gemm_dtypes: c.gemm_dtypes.clone(),
            fabric_slowest_peers: c.fabric_slowest_peers,
        }
    }
}

/// `backend` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// This node's GPUs.
    Nccl,
    /// The physical model of a profile.
    Sim,
}

/// Command-line flags; each also reads its `MESHFIT_*` variable.
#[derive(Debug, Parser)]
#[command(
    name = "agent",
    version,
    about = "meshfit agent: calibrates idle GPUs and serves Prometheus metrics",
    after_help = "Logs go to stderr. MESHFIT_LOG sets the filter (default info; e.g. \
                  agent=debug, or warn,agent::calibrate=debug). MESHFIT_LOG_FORMAT=json writes \
                  one JSON object per line (timestamp, level, target, fields.message) for log \
                  shippers; text, the default, is for people."
)]
pub struct Args {
    /// YAML configuration file.
    #[arg(long, env = "MESHFIT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the merged configuration as YAML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// :PORT (every address, IPv6 and IPv4) or ADDR:PORT to serve on (port 0: any free port).
    #[arg(long, env = "MESHFIT_LISTEN")]
    pub listen: Option<Listen>,
    /// State directory.
    #[arg(long, env = "MESHFIT_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Node name for the `hostname` label.
    #[arg(long, env = "MESHFIT_NODE_NAME")]
    pub node_name: Option<String>,
    /// Time between calibrations, like 6h.
    #[arg(long, env = "MESHFIT_INTERVAL")]
    pub interval: Option<Span>,
    /// Random extra wait, up to this.
    #[arg(long, env = "MESHFIT_JITTER")]
    pub jitter: Option<Span>,
    /// Retry wait after busy GPUs.
    #[arg(long, env = "MESHFIT_BUSY_RETRY")]
    pub busy_retry: Option<Span>,
    /// Time between live samples.
    #[arg(long, env = "MESHFIT_SAMPLE_INTERVAL")]
    pub sample_interval: Option<Span>,
    /// nccl or sim.
    #[arg(long, env = "MESHFIT_BACKEND", value_enum)]
    pub backend: Option<BackendKind>,
    /// Sim profile.
    #[arg(long, env = "MESHFIT_PROFILE")]
    pub profile: Option<String>,
    /// Sim fault, repeatable (`;` separates several in the variable).
    #[arg(long = "fault", env = "MESHFIT_FAULTS", value_delimiter = ';')]
    pub faults: Option<Vec<String>>,
    /// Sim noise seed.
    #[arg(long, env = "MESHFIT_SEED")]
    pub seed: Option<u64>,
    /// Sim busy GPUs, comma-separated.
    #[arg(long, env = "MESHFIT_BUSY", value_delimiter = ',')]
    pub busy: Option<Vec<u32>>,
    /// Sim busy-GPU file.
    #[arg(long, env = "MESHFIT_BUSY_FILE")]
    pub busy_file: Option<PathBuf>,
    /// Sim time per point.
    #[arg(long, env = "MESHFIT_SIM_POINT_DELAY")]
    pub sim_point_delay: Option<Span>,
    /// Sim PID shift of the driver's process list.
    #[arg(long, env = "MESHFIT_SIM_PID_OFFSET")]
    pub sim_pid_offset: Option<u32>,
    /// The microbench binary to calibrate with.
    #[arg(long, env = "MESHFIT_MICROBENCH_BIN")]
    pub microbench_bin: Option<PathBuf>,
    /// The host's /proc, for the calibration child's token.
    #[arg(long, env = "MESHFIT_HOST_PROC")]
    pub host_proc: Option<PathBuf>,
    /// Bearer token for POST /v1/calibrate.
    #[arg(long, env = "MESHFIT_CALIBRATE_TOKEN", hide_env_values = true)]
    pub calibrate_token: Option<Secret>,
    /// Idle utilisation threshold, percent.
    #[arg(long, env = "MESHFIT_MAX_UTILIZATION_PERCENT")]
    pub max_utilization_percent: Option<u32>,
    /// Idle memory threshold, 0 to 1.
    #[arg(long, env = "MESHFIT_MAX_MEMORY_USED_RATIO")]
    pub max_memory_used_ratio: Option<f64>,
    /// Idle re-check period during a calibration.
    #[arg(long, env = "MESHFIT_BUSY_CHECK_INTERVAL")]
    pub busy_check_interval: Option<Span>,
    /// Hung-point limit.
    #[arg(long, env = "MESHFIT_POINT_TIMEOUT")]
    pub point_timeout: Option<Span>,
    /// Whole-run limit.
    #[arg(long, env = "MESHFIT_RUN_TIMEOUT")]
    pub run_timeout: Option<Span>,
    /// HTTP request limit.
    #[arg(long, env = "MESHFIT_REQUEST_TIMEOUT")]
    pub request_timeout: Option<Span>,
    /// Open HTTP connections at most.
    #[arg(long, env = "MESHFIT_MAX_CONNECTIONS")]
    pub max_connections: Option<u32>,
    /// HTTP request head limit, from its first byte.
    #[arg(long, env = "MESHFIT_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<Span>,
    /// HTTP keep-alive limit between requests.
    #[arg(long, env = "MESHFIT_IDLE_TIMEOUT")]
    pub idle_timeout: Option<Span>,
    /// HTTP limit on a write that makes no progress.
    #[arg(long, env = "MESHFIT_WRITE_TIMEOUT")]
    pub write_timeout: Option<Span>,
    /// Smallest size, like 8 or 1K.
    #[arg(long, env = "MESHFIT_MIN_BYTES", value_parser = microbench::sweep::parse_size)]
    pub min_bytes: Option<u64>,
    /// Largest size, like 8G.
    #[arg(long, env = "MESHFIT_MAX_BYTES", value_parser = microbench::sweep::parse_size)]
    pub max_bytes: Option<u64>,
    /// Timed iterations per point.
    #[arg(long, env = "MESHFIT_ITERS")]
    pub iters: Option<u32>,
    /// Warm-up iterations per point.
    #[arg(long, env = "MESHFIT_WARMUP")]
    pub warmup: Option<u32>,
    /// Collective element type.
    #[arg(long, env = "MESHFIT_DTYPE")]
    pub dtype: Option<Dtype>,
    /// GEMM types, comma-separated.
    #[arg(long, env = "MESHFIT_GEMM_DTYPES", value_delimiter = ',')]
    pub gemm_dtypes: Option<Vec<Dtype>>,
    /// Fabric pairs exported per rail besides the fastest (the slowest peers).
    #[arg(long, env = "MESHFIT_FABRIC_SLOWEST_PEERS")]
    pub fabric_slowest_peers: Option<u32>,
}

impl Config {
    /// Defaults, then the YAML file, then environment and flags (clap has merged those two,
    /// a flag winning over its variable). The result is checked.
    pub fn load(args: Args) -> Result<Config> {
        let mut keys = match &args.config {
            Some(path) => Keys::from_file(path)?,
            None => Keys::default(),
        };
        macro_rules! overlay {
            ($($field:ident),*) => { $( if let Some(v) = args.$field { keys.$field = v; } )* };
        }
        macro_rules! overlay_some {
            ($($field:ident),*) => { $( if let Some(v) = args.$field { keys.$field = Some(v); } )* };
        }
        overlay!(
            listen,
            state_dir,
            interval,
            jitter,
            busy_retry,
            sample_interval,
            backend,
            faults,
            seed,
            busy,
            sim_point_delay,
            sim_pid_offset,
            host_proc,
            max_utilization_percent,
            max_memory_used_ratio,
            busy_check_interval,
            point_timeout,
            run_timeout,
            request_timeout,
            max_connections,
            header_read_timeout,
            idle_timeout,
            write_timeout,
            min_bytes,
            max_bytes,
            iters,
            warmup,
            dtype,
            gemm_dtypes,
            fabric_slowest_peers
        );
        overlay_some!(
            node_name,
            profile,
            busy_file,
            microbench_bin,
            calibrate_token
        );
        keys.check()
    }

    /// Parses YAML text over the defaults and checks it.
    pub fn from_yaml(text: &str) -> std::result::Result<Config, String> {
        Keys::from_yaml(text)?.check().map_err(|e| e.to_string())
    }

    /// The merged configuration as YAML (the token hidden).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(&Keys::from(self))
            .unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }
}

impl Keys {
    /// Reads a YAML file over the defaults; unknown keys are errors that name the key.
    fn from_file(path: &Path) -> Result<Keys> {
        let text = crate::input::read_text(path, MAX_CONFIG_BYTES).map_err(Error::ConfigRead)?;
        Keys::from_yaml(&text).map_err(|message| Error::ConfigFile {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses YAML text over the defaults.
    fn from_yaml(text: &str) -> std::result::Result<Keys, String> {
        if text.trim().is_empty() {
            return Ok(Keys::default());
        }
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }

    /// Checks values that their types alone do not bound, and groups them. The faults are
    /// parsed after the other checks: on `nccl` a fault is refused as sim-only, whatever it
    /// says.
    fn check(self) -> Result<Config> {
        self.check_shares()?;
        self.check_spans()?;
        self.check_counts()?;
        self.check_backend()?;
        let faults = self
            .faults
            .iter()
            .map(|f| fault(f))
            .collect::<Result<_>>()?;
        Ok(Config {
            listen: self.listen,
            state_dir: self.state_dir,
            node_name: self.node_name,
            interval: self.interval,
            jitter: self.jitter,
            busy_retry: self.busy_retry,
            sample_interval: self.sample_interval,
            backend: self.backend,
            sim: SimConfig {
                profile: self.profile,
                faults,
                seed: self.seed,
                busy: self.busy,
                busy_file: self.busy_file,
                point_delay: self.sim_point_delay,
                pid_offset: self.sim_pid_offset,
            },
            microbench_bin: self.microbench_bin,
            host_proc: self.host_proc,
            calibrate_token: self.calibrate_token,
            idle: IdleGate {
                max_utilization_percent: self.max_utilization_percent,
                max_memory_used_ratio: self.max_memory_used_ratio,
                busy_check_interval: self.busy_check_interval,
            },
            point_timeout: self.point_timeout,
            run_timeout: self.run_timeout,
            http: HttpLimits {
                request_timeout: self.request_timeout,
                max_connections: self.max_connections,
                header_read_timeout: self.header_read_timeout,
                idle_timeout: self.idle_timeout,
                write_timeout: self.write_timeout,
            },
            min_bytes: self.min_bytes,
            max_bytes: self.max_bytes,
            iters: self.iters,
            warmup: self.warmup,
            dtype: self.dtype,
            gemm_dtypes: self.gemm_dtypes,
            fabric_slowest_peers: self.fabric_slowest_peers,
        })
    }

    /// The idle rule's thresholds are shares: a percentage and a ratio.
    fn check_shares(&self) -> Result<()> {
        if self.max_utilization_percent > 100 {
            return Err(bad(
                "max_utilization_percent",
                self.max_utilization_percent.to_string(),
                "0 to 100",
            ));
        }
        if !(0.0..=1.0).contains(&self.max_memory_used_ratio) {
            return Err(bad(
                "max_memory_used_ratio",
                self.max_memory_used_ratio.to_string(),
                "0 to 1",
            ));
        }
        Ok(())
    }

    /// Every interval and timeout has a floor below which the agent would spin or time out
    /// at once; the idle check a ceiling too.
    fn check_spans(&self) -> Result<()> {
        let floors: [(Duration, &[(&'static str, Span)]); 3] = [
            (Duration::from_secs(1), &[("interval", self.interval)]),
            (
                Duration::from_millis(100),
                &[
                    ("sample_interval", self.sample_interval),
                    ("busy_retry", self.busy_retry),
                ],
            ),
            (
                Duration::from_millis(10),
                &[
                    ("busy_check_interval", self.busy_check_interval),
                    ("point_timeout", self.point_timeout),
                    ("run_timeout", self.run_timeout),
                    ("request_timeout", self.request_timeout),
                    ("header_read_timeout", self.header_read_timeout),
                    ("idle_timeout", self.idle_timeout),
                    ("write_timeout", self.write_timeout),
                ],
            ),
        ];
        for (least, spans) in floors {
            for &(field, span) in spans {
                if span.0 < least {
                    return Err(bad(
                        field,
                        span.to_string(),
                        &format!("at least {}", Span(least)),
                    ));
                }
            }
        }
        // An idle check slower than a second could not stop a run within a second.
        if self.busy_check_interval.0 > Duration::from_secs(1) {
            return Err(bad(
                "busy_check_interval",
                self.busy_check_interval.to_string(),
                "at most 1s, so a job that appears stops the run within a second",
            ));
        }
        Ok(())
    }

    /// Counts and sizes that zero (or a reversed range, or an empty token) would make
    /// meaningless.
    fn check_counts(&self) -> Result<()> {
        if self.max_connections == 0 {
            return Err(bad("max_connections", "0".into(), "at least 1"));
        }
        if self.iters == 0 {
            return Err(bad("iters", "0".into(), "at least 1"));
        }
        if self.fabric_slowest_peers > MAX_SLOWEST_PEERS {
            return Err(bad(
                "fabric_slowest_peers",
                self.fabric_slowest_peers.to_string(),
                &format!("0 to {MAX_SLOWEST_PEERS}: more would export a pair per peer again"),
            ));
        }
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes {
            return Err(bad(
                "min_bytes",
                format!("{} (max_bytes {})", self.min_bytes, self.max_bytes),
                "0 < min_bytes <= max_bytes",
            ));
        }
        if matches!(&self.calibrate_token, Some(t) if t.0.trim().is_empty()) {
            return Err(bad("calibrate_token", "\"\"".into(), "a non-empty token"));
        }
        Ok(())
    }

    /// The sim needs a profile; real GPUs refuse every setting only the sim reads.
    fn check_backend(&self) -> Result<()> {
        match self.backend {
            BackendKind::Sim if self.profile.is_none() => {
                let names: Vec<&str> = microbench::sim::profiles().iter().map(|p| p.name).collect();
                Err(bad(
                    "profile",
                    "(none)".into(),
                    &format!("backend sim needs a profile: one of {}", names.join(", ")),
                ))
            }
            BackendKind::Nccl => {
                let sim_only = [
                    ("profile", self.profile.is_some()),
                    ("faults", !self.faults.is_empty()),
                    ("busy", !self.busy.is_empty()),
                    ("busy_file", self.busy_file.is_some()),
                    ("sim_point_delay", !self.sim_point_delay.0.is_zero()),
                    ("sim_pid_offset", self.sim_pid_offset != 0),
                ];
                match sim_only.iter().find(|(_, set)| *set) {
                    Some((field, _)) => {
                        Err(bad(field, "(set)".into(), "applies to backend sim only"))
                    }
                    None => Ok(()),
                }
            }
            BackendKind::Sim => Ok(()),
        }
    }
}

/// A setting `field` whose `value` is not what is `expected`.
fn bad(field: &'static str, value: String, expected: &str) -> Error {
    Error::BadValue {
        field,
        value,
        expected: expected.to_string(),
    }
}

/// A sim fault in microbench's spelling; its error names the YAML key where microbench's
/// names its `--fault` flag.
fn fault(text: &str) -> Result<Fault> {
    text.parse().map_err(|e| match e {
        microbench::Error::BadValue {
            value, expected, ..
        } => bad("faults", value, &expected),
        other => Error::from(other),
    })
}

mod values;
pub use values::{Secret, Span};

#[cfg(test)]
mod tests;
