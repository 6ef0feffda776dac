//! The flags that fill what a log does not state, checked before any log is read, and the
//! rule that a flag may fill a field but never overrule the log.

use std::fmt::Display;

use super::error::JobError;
use super::job::{Job, Stated};
use super::runs_file::ClusterOut;
use crate::error::{bad_input, TunerError};

/// What the command line fills in where a log is silent. Each is checked by
/// [`Overrides::check`]; where a log states a value and a flag contradicts it, [`to_run`]
/// refuses naming both.
///
/// [`to_run`]: super::to_run
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--gpu`: a catalog GPU id.
    pub gpu: Option<String>,
    /// `--gpus`: GPUs of the job.
    pub gpus: Option<u32>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<u32>,
    /// `--nics-per-node`.
    pub nics_per_node: Option<u32>,
    /// `--nic-gbps`: line rate of one NIC, Gbit/s.
    pub nic_gbps: Option<f64>,
    /// `--global-batch`: sequences per iteration.
    pub global_batch: Option<u32>,
    /// `--warmup`: iteration lines dropped instead of [`warmup_lines`]'s count.
    ///
    /// [`warmup_lines`]: super::warmup_lines
    pub warmup: Option<usize>,
    /// `--group`: the runs' group instead of `jobs-<stem>`.
    pub group: Option<String>,
}

impl Overrides {
    /// Checks each flag's value, naming the flag, the value and what is allowed.
    pub fn check(&self) -> Result<(), TunerError> {
        if let Some(id) = &self.gpu {
            if crate::catalog::gpu(id).is_err() {
                let ids: Vec<&str> = crate::catalog::GPUS.iter().map(|g| g.id).collect();
                return Err(bad_input(
                    "--gpu",
                    id,
                    &format!("a catalog GPU id: {}", ids.join(", ")),
                ));
            }
        }
        let positive = |flag: &str, v: Option<u32>, most: u32| match v {
            Some(n) if n == 0 || n > most => Err(bad_input(
                flag,
                n,
                &format!("a positive count, at most {most}"),
            )),
            _ => Ok(()),
        };
        positive("--gpus", self.gpus, 1 << 20)?;
        positive("--gpus-per-node", self.gpus_per_node, 1024)?;
        positive("--global-batch", self.global_batch, 1 << 24)?;
        if let Some(n) = self.nics_per_node {
            if n > 1024 {
                return Err(bad_input("--nics-per-node", n, "a count up to 1024"));
            }
        }
        if let Some(g) = self.nic_gbps {
            crate::catalog::check_nic_gbps("--nic-gbps", g)?;
        }
        if let Some(group) = &self.group {
            if group.trim().is_empty() {
                return Err(bad_input("--group", "''", "a non-empty name"));
            }
        }
        Ok(())
    }
}

/// The value of `field`: the log's, or the flag's where the log is silent; a flag that
/// contradicts the log is refused naming both.
fn pick<T: PartialEq + Display + Clone>(
    file: &str,
    flag: &'static str,
    what: &'static str,
    stated: &Option<Stated<T>>,
    given: Option<T>,
) -> Result<Option<T>, JobError> {
    match (stated, given) {
        (Some(s), Some(g)) if s.value != g => Err(JobError::Contradicts {
            file: file.to_string(),
            flag,
            value: g.to_string(),
            line: s.line,
            stated: s.value.to_string(),
            what,
        }),
        (Some(s), _) => Ok(Some(s.value.clone())),
        (None, g) => Ok(g),
    }
}

impl Overrides {
    /// The cluster `job`'s log (`file`) states, each flag filling a field the log leaves out:
    /// the first flag that contradicts the log stops the run, so that a mistyped flag is not
    /// written into the runs file as if the log said it.
    pub(crate) fn cluster(&self, job: &Job, file: &str) -> Result<ClusterOut, JobError> {
        let c = &job.cluster;
        Ok(ClusterOut {
            gpu: pick_gpu(file, &c.gpu, &self.gpu)?,
            gpus: pick(file, "--gpus", "cluster.gpus", &c.gpus, self.gpus)?,
            gpus_per_node: pick(
                file,
                "--gpus-per-node",
                "cluster.gpus_per_node",
                &c.gpus_per_node,
                self.gpus_per_node,
            )?,
            nics_per_node: pick(
                file,
                "--nics-per-node",
                "cluster.nics_per_node",
                &c.nics_per_node,
                self.nics_per_node,
            )?,
            nic_gbps: pick(
                file,
                "--nic-gbps",
                "cluster.nic_gbps",
                &c.nic_gbps,
                self.nic_gbps,
            )?,
        })
    }

    /// The global batch, by the same rule as [`Overrides::cluster`].
    pub(crate) fn global_batch(&self, job: &Job, file: &str) -> Result<Option<u32>, JobError> {
        pick(
            file,
            "--global-batch",
            "layout.global_batch_size",
            &job.layout.global_batch_size,
            self.global_batch,
        )
    }
}

/// `--gpu` against the GPU the log names. A flag may name a variant of the part the log names
/// (`h100-sxm-96gb-500w` for a log that says H100), and then the flag wins: the log's name says
/// which part, not which of its variants. Only the part's first word must agree.
fn pick_gpu(
    file: &str,
    stated: &Option<Stated<String>>,
    given: &Option<String>,
) -> Result<Option<String>, JobError> {
    match (stated, given) {
        (Some(s), Some(g)) if s.value.split('-').next() != g.split('-').next() => {
            Err(JobError::Contradicts {
                file: file.to_string(),
                flag: "--gpu",
                value: g.clone(),
                line: s.line,
                stated: s.value.clone(),
                what: "cluster.gpu",
            })
        }
        (_, Some(g)) => Ok(Some(g.clone())),
        (Some(s), None) => Ok(Some(s.value.clone())),
        (None, None) => Ok(None),
    }
}
