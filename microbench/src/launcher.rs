//! Where this process sits in a multi-node job, read from the launcher's environment
//! (issue 12), so `microbench` joins a job under srun, mpirun, torchrun or a Kubernetes
//! Indexed Job without an MPI library.
//!
//! | launcher | rank | world | local rank | node |
//! | --- | --- | --- | --- | --- |
//! | torchrun | `RANK` | `WORLD_SIZE` | `LOCAL_RANK` | host name (`GROUP_RANK`/`NODE_RANK` checked) |
//! | Slurm (srun) | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_LOCALID` | `SLURMD_NODENAME`, else host name (`SLURM_NODEID` checked) |
//! | Open MPI / PMIx | `OMPI_COMM_WORLD_RANK` or `PMIX_RANK` | `OMPI_COMM_WORLD_SIZE`, else `MESHFIT_WORLD_SIZE` | `OMPI_COMM_WORLD_LOCAL_RANK`, else 0 | host name |
//! | Kubernetes Indexed Job / JobSet | `JOB_COMPLETION_INDEX` x `MESHFIT_RANKS_PER_POD` + `MESHFIT_LOCAL_RANK` | `MESHFIT_WORLD_SIZE` (pods x ranks per pod) | `MESHFIT_LOCAL_RANK`, else 0 | `HOSTNAME` (the pod) |
//!
//! Every rank presents the job's id at the rendezvous, and rank 0 refuses a peer whose id is
//! not its own (a rank of another job sharing the port, a stray client): `--job-id` (or
//! `MESHFIT_JOB_ID`), else the launcher's own, the same on every rank of one job and new for
//! each: torchrun's `TORCHELASTIC_RUN_ID` (its `--rdzv-id`), Slurm's `SLURM_JOB_ID`, PMIx's
//! `PMIX_NAMESPACE` (Open MPI 4 and 5). A Kubernetes Indexed Job has none of its own: the
//! chart sets `MESHFIT_JOB_ID` to the Job's name.
//!
//! `MESHFIT_NODE_NAME` (or `--node-name`) overrides the node: the agent's Kubernetes node
//! name from the downward API, or several sim "nodes" on one machine in tests. The rendezvous
//! is at `MASTER_ADDR:MASTER_PORT` (port 29500 when unset, torchrun's default); Slurm and
//! Open MPI do not set them, so their recipes export
//! `MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)` or the first host
//! of the `mpirun -H` list. An sbatch script's own shell has `SLURM_PROCID` and
//! `SLURM_NTASKS` too: start `microbench` there through srun, or with `--launcher none` to
//! run one process.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// torchrun's default rendezvous port, used when `MASTER_PORT` is unset.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// A launcher whose variables say where this process sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// torchrun and torch-style launchers.
    Torchrun,
    /// Slurm's srun.
    Slurm,
    /// Open MPI's mpirun, or any PMIx launcher.
    Mpi,
    /// A Kubernetes Indexed Job or JobSet.
    K8s,
}

/// `--launcher`: one launcher, the first found, or none (a single process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The first launcher whose variables are set, in the order torchrun, Slurm, MPI, k8s:
    /// torchrun inside an srun step sets its own ranks, which win.
    Auto,
    /// Never join a job.
    None,
    /// This launcher only; its variables must be set.
    Only(Launcher),
}

const CHOICES: &str = "auto, none, slurm, mpi, k8s, torchrun";

impl FromStr for Choice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Choice> {
        Ok(match s {
            "auto" => Choice::Auto,
            "none" => Choice::None,
            "slurm" => Choice::Only(Launcher::Slurm),
            "mpi" => Choice::Only(Launcher::Mpi),
            "k8s" => Choice::Only(Launcher::K8s),
            "torchrun" => Choice::Only(Launcher::Torchrun),
            _ => {
                return Err(Error::BadValue {
                    field: "--launcher",
                    value: s.into(),
                    expected: format!("one of {CHOICES}"),
                })
            }
        })
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Slurm => "slurm",
            Launcher::Mpi => "mpi",
            Launcher::K8s => "k8s",
        })
    }
}

/// This process's place in a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The launcher it was read from.
    pub launcher: Launcher,
    /// Global rank, 0 to `world - 1`.
    pub rank: u32,
    /// Ranks in the job.
    pub world: u32,
    /// Rank on its node; the GPU it drives.
    pub local_rank: u32,
    /// The node it runs on.
    pub node: String,
    /// Rank 0's rendezvous host.
    pub master_addr: String,
    /// Rank 0's rendezvous port.
    pub master_port: u16,
    /// The job's id, which every rank presents at the rendezvous.
    pub job_id: String,
}

/// Reads the placement from `env` (a variable lookup, so tests pass a map). `node_name` is
/// `--node-name`, `job_id` `--job-id`, `host` this machine's host name. `None` when no launcher variables are
/// set, or they describe a job of one rank: the process then runs alone, as before.
pub fn detect(
    choice: Choice,
    env: &dyn Fn(&str) -> Option<String>,
    (node_name, job_id): (Option<&str>, Option<&str>),
    host: &str,
) -> Result<Option<Placement>> {
    let Some(launcher) = chosen(choice, env)? else {
        return Ok(None);
    };
    let Ranks {
        rank,
        world,
        local_rank,
        node: launcher_node,
    } = ranks(launcher, env)?;
    check_rank(launcher, env, rank, world)?;
    if world == 1 {
        return Ok(None);
    }
    let master_addr = master_addr(launcher, env)?;
    let master_port = master_port(env)?;
    let job_id = self::job_id(launcher, env, job_id)?;
    let node = node_name
        .map(str::to_string)
        .or_else(|| env("MESHFIT_NODE_NAME"))
        .or(launcher_node)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| host.to_string());
    Ok(Some(Placement {
        launcher,
        rank,
        world,
        local_rank,
        node,
        master_addr,
        master_port,
        job_id,
    }))
}

/// The variables that carry `launcher`'s job id, first set wins.
fn job_id_vars(launcher: Launcher) -> &'static [&'static str] {
    match launcher {
        Launcher::Torchrun => &["TORCHELASTIC_RUN_ID"],
        Launcher::Slurm => &["SLURM_JOB_ID"],
        Launcher::Mpi => &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"],
        Launcher::K8s => &[],
    }
}

/// The job's id: `flag` (`--job-id`), else `MESHFIT_JOB_ID`, else the launcher's.
fn job_id(
    launcher: Launcher,
    env: &dyn Fn(&str) -> Option<String>,
    flag: Option<&str>,
) -> Result<String> {
    let vars = job_id_vars(launcher);
    flag.map(str::to_string)
        .or_else(|| env("MESHFIT_JOB_ID"))
        .or_else(|| vars.iter().find_map(|v| env(v)))
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            let own = if vars.is_empty() {
                format!("{launcher} sets none of its own")
            } else {
                format!("else {}, which {launcher} sets", vars.join(" or "))
            };
            bad(
                "job id",
                "",
                format!(
                    "the job's id, the same on every rank, so that rank 0 refuses ranks of \
                     another job: --job-id or MESHFIT_JOB_ID ({own})"
                ),
            )
        })
}

/// The launcher `choice` names, or under `auto` the first whose variables are set; `None`
/// for a single process. A launcher named outright must have its variables set.
fn chosen(choice: Choice, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Launcher>> {
    let launcher = match choice {
        Choice::None => return Ok(None),
        Choice::Only(l) => l,
        Choice::Auto => match [
            Launcher::Torchrun,
            Launcher::Slurm,
            Launcher::Mpi,
            Launcher::K8s,
        ]
        .into_iter()
        .find(|&l| present(l, env))
        {
            Some(l) => l,
            None => return Ok(None),
        },
    };
    if !present(launcher, env) {
        return Err(Error::BadValue {
            field: "--launcher",
            value: launcher.to_string(),
            expected: format!("{} set in the environment", marker(launcher)),
        });
    }
    Ok(Some(launcher))
}

/// What a launcher's variables say of this process, before they are checked against each
/// other.
struct Ranks {
    rank: u32,
    world: u32,
    local_rank: u32,
    /// The node, where the launcher names it (Slurm, Kubernetes).
    node: Option<String>,
}

/// Reads `launcher`'s variables, each named in its error (the table at the top).
fn ranks(launcher: Launcher, env: &dyn Fn(&str) -> Option<String>) -> Result<Ranks> {
    let vars = Vars { env };
    match launcher {
        Launcher::Torchrun => torchrun_ranks(&vars),
        Launcher::Slurm => slurm_ranks(&vars),
        Launcher::Mpi => mpi_ranks(&vars),
        Launcher::K8s => k8s_ranks(&vars),
    }
}

/// torchrun's: `GROUP_RANK` and `NODE_RANK` are only checked to be whole numbers.
fn torchrun_ranks(vars: &Vars) -> Result<Ranks> {
    for node_index in ["GROUP_RANK", "NODE_RANK"] {
        vars.optional(node_index)?;
    }
    Ok(Ranks {
        rank: vars.required("RANK")?,
        world: vars.required("WORLD_SIZE")?,
        local_rank: vars.optional("LOCAL_RANK")?.unwrap_or(0),
        node: None,
    })
}

/// Slurm's: `SLURM_NODEID` is only checked to be a whole number.
fn slurm_ranks(vars: &Vars) -> Result<Ranks> {
    vars.optional("SLURM_NODEID")?;
    Ok(Ranks {
        rank: vars.required("SLURM_PROCID")?,
        world: vars.required("SLURM_NTASKS")?,
        local_rank: vars.optional("SLURM_LOCALID")?.unwrap_or(0),
        node: (vars.env)("SLURMD_NODENAME"),
    })
}

/// Open MPI's, else PMIx's rank with the world size meshfit's recipes export.
fn mpi_ranks(vars: &Vars) -> Result<Ranks> {
    let rank = match vars.optional("OMPI_COMM_WORLD_RANK")? {
        Some(r) => r,
        None => vars.required("PMIX_RANK")?,
    };
    let world = match vars.optional("OMPI_COMM_WORLD_SIZE")? {
        Some(w) => w,
        None => vars.required("MESHFIT_WORLD_SIZE")?,
    };
    let local = vars.optional("OMPI_COMM_WORLD_LOCAL_RANK")?.unwrap_or(0);
    Ok(Ranks {
        rank,
        world,
        local_rank: local,
        node: None,
    })
}

/// A Kubernetes Indexed Job's: the pod's index times its ranks, plus the local rank.
fn k8s_ranks(vars: &Vars) -> Result<Ranks> {
    let index = vars.required("JOB_COMPLETION_INDEX")?;
    let per_pod = vars.optional("MESHFIT_RANKS_PER_POD")?.unwrap_or(1);
    if per_pod == 0 {
        return Err(bad("MESHFIT_RANKS_PER_POD", "0", "1 or more".into()));
    }
    let local = vars.optional("MESHFIT_LOCAL_RANK")?.unwrap_or(0);
    if local >= per_pod {
        return Err(bad(
            "MESHFIT_LOCAL_RANK",
            &local.to_string(),
            format!("below MESHFIT_RANKS_PER_POD ({per_pod})"),
        ));
    }
    let rank = index
        .checked_mul(per_pod)
        .and_then(|r| r.checked_add(local))
        .ok_or_else(|| {
            bad(
                "JOB_COMPLETION_INDEX",
                &index.to_string(),
                "an index whose ranks fit in 32 bits".into(),
            )
        })?;
    Ok(Ranks {
        rank,
        world: vars.required("MESHFIT_WORLD_SIZE")?,
        local_rank: local,
        node: (vars.env)("HOSTNAME"),
    })
}

/// A world of at least one rank, and `rank` in it; the errors name the launcher's variables.
fn check_rank(
    launcher: Launcher,
    env: &dyn Fn(&str) -> Option<String>,
    rank: u32,
    world: u32,
) -> Result<()> {
    if world == 0 {
        return Err(bad(world_var(launcher, env), "0", "1 or more ranks".into()));
    }
    if rank >= world {
        return Err(Error::BadValue {
            field: rank_var(launcher, env),
            value: rank.to_string(),
            expected: format!(
                "a rank below the world size {world} ({})",
                world_var(launcher, env)
            ),
        });
    }
    Ok(())
}

/// Rank 0's host from `MASTER_ADDR`, which srun and mpirun leave to the recipe.
fn master_addr(launcher: Launcher, env: &dyn Fn(&str) -> Option<String>) -> Result<String> {
    env("MASTER_ADDR")
        .filter(|a| !a.is_empty())
        .ok_or_else(|| Error::BadValue {
            field: "MASTER_ADDR",
            value: String::new(),
            expected: format!(
                "rank 0's host, where the rendezvous listens; torchrun sets it, srun and mpirun \
                 do not: export it to every rank, e.g. MASTER_ADDR=$(scontrol show hostnames \
                 \"$SLURM_JOB_NODELIST\" | head -1) or the first host of mpirun -H \
                 (launcher: {launcher})"
            ),
        })
}

/// Rank 0's port from `MASTER_PORT`, torchrun's default when unset.
fn master_port(env: &dyn Fn(&str) -> Option<String>) -> Result<u16> {
    Ok(match env("MASTER_PORT") {
        None => DEFAULT_MASTER_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("MASTER_PORT", &p, "a TCP port, 1 to 65535".into()))?,
    })
}

/// The variable whose presence selects `launcher` under `--launcher auto`.
fn marker(launcher: Launcher) -> &'static str {
    match launcher {
        Launcher::Torchrun => "WORLD_SIZE",
        Launcher::Slurm => "SLURM_PROCID",
        Launcher::Mpi => "OMPI_COMM_WORLD_RANK or PMIX_RANK",
        Launcher::K8s => "JOB_COMPLETION_INDEX",
    }
}

fn present(launcher: Launcher, env: &dyn Fn(&str) -> Option<String>) -> bool {
    match launcher {
        Launcher::Mpi => env("OMPI_COMM_WORLD_RANK").is_some() || env("PMIX_RANK").is_some(),
        other => env(marker(other)).is_some(),
    }
}

fn rank_var(launcher: Launcher, env: &dyn Fn(&str) -> Option<String>) -> &'static str {
    match launcher {
        Launcher::Torchrun => "RANK",
        Launcher::Slurm => "SLURM_PROCID",
        Launcher::Mpi if env("OMPI_COMM_WORLD_RANK").is_some() => "OMPI_COMM_WORLD_RANK",
        Launcher::Mpi => "PMIX_RANK",
        Launcher::K8s => "JOB_COMPLETION_INDEX",
    }
}

fn world_var(launcher: Launcher, env: &dyn Fn(&str) -> Option<String>) -> &'static str {
    match launcher {
        Launcher::Torchrun => "WORLD_SIZE",
        Launcher::Slurm => "SLURM_NTASKS",
        Launcher::Mpi if env("OMPI_COMM_WORLD_SIZE").is_some() => "OMPI_COMM_WORLD_SIZE",
        Launcher::Mpi | Launcher::K8s => "MESHFIT_WORLD_SIZE",
    }
}

fn bad(field: &'static str, value: &str, expected: String) -> Error {
    Error::BadValue {
        field,
        value: value.to_string(),
        expected,
    }
}

/// Whole-number variables, each named in its error.
struct Vars<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Vars<'_> {
    fn optional(&self, name: &'static str) -> Result<Option<u32>> {
        (self.env)(name)
            .map(|v| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| bad(name, &v, "a whole number, 0 or more".into()))
            })
            .transpose()
    }

    fn required(&self, name: &'static str) -> Result<u32> {
        self.optional(name)?
            .ok_or_else(|| bad(name, "", "set by the launcher (a whole number)".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn detect_in(choice: Choice, vars: &[(&str, &str)]) -> Result<Option<Placement>> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        detect(choice, &|k| map.get(k).cloned(), (None, None), "host-a")
    }

    fn placed(vars: &[(&str, &str)]) -> Placement {
        detect_in(Choice::Auto, vars).unwrap().unwrap()
    }

    const MASTER: [(&str, &str); 2] = [("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "1234")];

    #[test]
    fn torchrun() {
        let p = placed(&[
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_RANK", "5"),
            ("GROUP_RANK", "0"),
            ("TORCHELASTIC_RUN_ID", "llama-42"),
            MASTER[0],
            MASTER[1],
        ]);
        assert_eq!(
            p,
            Placement {
                launcher: Launcher::Torchrun,
                rank: 5,
                world: 16,
                local_rank: 5,
                node: "host-a".into(),
                master_addr: "10.0.0.1".into(),
                master_port: 1234,
                job_id: "llama-42".into(),
            }
        );
    }

    #[test]
    fn slurm_names_the_node_and_defaults_the_port() {
        let p = placed(&[
            ("SLURM_PROCID", "9"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "1"),
            ("SLURMD_NODENAME", "gpu-017"),
            ("SLURM_JOB_ID", "81234"),
            MASTER[0],
        ]);
        assert_eq!(
            (p.launcher, p.rank, p.world, p.local_rank, p.node.as_str()),
            (Launcher::Slurm, 9, 16, 1, "gpu-017")
        );
        assert_eq!(p.master_port, DEFAULT_MASTER_PORT);
        assert_eq!(p.job_id, "81234");
    }

    #[test]
    fn open_mpi_and_pmix() {
        let p = placed(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_MCA_ess_base_jobid", "2384461825"),
            MASTER[0],
        ]);
        assert_eq!(
            (p.launcher, p.rank, p.world, p.local_rank, p.job_id.as_str()),
            (Launcher::Mpi, 3, 4, 1, "2384461825")
        );
        let p = placed(&[
            ("PMIX_RANK", "2"),
            ("MESHFIT_WORLD_SIZE", "4"),
            ("PMIX_NAMESPACE", "prterun-gpu-a-81234@1"),
            MASTER[0],
        ]);
        assert_eq!((p.rank, p.world, p.local_rank), (2, 4, 0));
        assert_eq!(p.job_id, "prterun-gpu-a-81234@1");
    }

    #[test]
    fn kubernetes_indexed_job_with_two_ranks_per_pod() {
        let p = placed(&[
            ("JOB_COMPLETION_INDEX", "3"),
            ("MESHFIT_WORLD_SIZE", "8"),
            ("MESHFIT_RANKS_PER_POD", "2"),
            ("MESHFIT_LOCAL_RANK", "1"),
            ("HOSTNAME", "fabric-3-abcde"),
            ("MESHFIT_NODE_NAME", "gpu-node-7"),
            ("MESHFIT_JOB_ID", "meshfit-fabric-29123456"),
            MASTER[0],
        ]);
        assert_eq!(
            (p.launcher, p.rank, p.world, p.local_rank, p.node.as_str()),
            (Launcher::K8s, 7, 8, 1, "gpu-node-7")
        );
        assert_eq!(p.job_id, "meshfit-fabric-29123456");
        let err = detect_in(
            Choice::Auto,
            &[
                ("JOB_COMPLETION_INDEX", "0"),
                ("MESHFIT_WORLD_SIZE", "8"),
                ("MESHFIT_RANKS_PER_POD", "2"),
                ("MESHFIT_LOCAL_RANK", "2"),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MESHFIT_LOCAL_RANK `2`: below MESHFIT_RANKS_PER_POD (2)"
        );
    }

    /// `--job-id` wins over MESHFIT_JOB_ID, which wins over the launcher's; a job with
    /// none is refused, naming where an id comes from.
    #[test]
    fn the_job_id_comes_from_the_flag_then_meshfit_job_id_then_the_launcher() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm: &[(&str, &str)] = &[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "4"),
            MASTER[0],
            ("SLURM_JOB_ID", "81234"),
            ("MESHFIT_JOB_ID", "mine"),
        ];
        let id = |flag, vars| {
            detect(Choice::Auto, &env(vars), (None, flag), "h")
                .unwrap()
                .unwrap()
                .job_id
        };
        assert_eq!(id(Some("flag"), slurm), "flag");
        assert_eq!(id(None, slurm), "mine");
        assert_eq!(id(None, &slurm[..4]), "81234");
        let err = detect_in(
            Choice::Auto,
            &[
                ("JOB_COMPLETION_INDEX", "1"),
                ("MESHFIT_WORLD_SIZE", "2"),
                MASTER[0],
            ],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "job id ``: the job's id, the same on every rank, so that rank 0 refuses ranks of \
             another job: --job-id or MESHFIT_JOB_ID (k8s sets none of its own)"
        );
        let err = detect_in(
            Choice::Auto,
            &[("RANK", "1"), ("WORLD_SIZE", "2"), MASTER[0]],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.ends_with("(else TORCHELASTIC_RUN_ID, which torchrun sets)"),
            "{err}"
        );
    }

    #[test]
    fn no_variables_or_one_rank_or_none_runs_alone() {
        assert_eq!(detect_in(Choice::Auto, &[]).unwrap(), None);
        assert_eq!(
            detect_in(Choice::Auto, &[("RANK", "0"), ("WORLD_SIZE", "1")]).unwrap(),
            None
        );
        assert_eq!(
            detect_in(Choice::None, &[("RANK", "0"), ("WORLD_SIZE", "4")]).unwrap(),
            None
        );
    }

    #[test]
    fn bad_variables_name_the_variable_value_and_what_is_allowed() {
        let err = |choice, vars: &[(&str, &str)]| detect_in(choice, vars).unwrap_err().to_string();
        assert_eq!(
            err(Choice::Auto, &[("RANK", "x"), ("WORLD_SIZE", "4")]),
            "RANK `x`: a whole number, 0 or more"
        );
        assert_eq!(
            err(
                Choice::Auto,
                &[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")]
            ),
            "SLURM_PROCID `4`: a rank below the world size 4 (SLURM_NTASKS)"
        );
        assert!(err(Choice::Auto, &[("RANK", "1"), ("WORLD_SIZE", "4")])
            .starts_with("MASTER_ADDR ``: rank 0's host"));
        assert_eq!(
            err(
                Choice::Auto,
                &[
                    ("RANK", "1"),
                    ("WORLD_SIZE", "4"),
                    MASTER[0],
                    ("MASTER_PORT", "0")
                ]
            ),
            "MASTER_PORT `0`: a TCP port, 1 to 65535"
        );
        assert_eq!(
            err(Choice::Only(Launcher::Slurm), &[("RANK", "1")]),
            "--launcher `slurm`: SLURM_PROCID set in the environment"
        );
        assert_eq!(
            "lsf".parse::<Choice>().unwrap_err().to_string(),
            "--launcher `lsf`: one of auto, none, slurm, mpi, k8s, torchrun"
        );
    }
}
