//! Jobs from logs: the training logs a cluster already has (Megatron-LM and
//! Megatron-DeepSpeed, NeMo and Megatron-Bridge, torchtitan, DeepSpeed) turned into runs of
//! the runs format (format 1, what `tuner validate --runs` reads), so that the cluster's own
//! jobs can calibrate the model.
//!
//! One reader per log family ([`megatron`], [`nemo`], [`torchtitan`], [`deepspeed`]) fills a
//! [`Job`]: each field the log states with the line that states it, the per-iteration figures
//! it prints, and the lines it could not use. This module decides which family a log is
//! ([`read_log`]) and runs the command over its logs ([`jobs_from_logs`]); what the readers
//! share lies in parts named for what they hold, so that a reader's author finds each rule it
//! must follow in one place: the job they fill (`job`), what launchers print (`launcher`), the
//! steady-state rule (`steady_state`: [`warmup_lines`], [`steady_state`](fn@steady_state)),
//! the flags that fill what a log lacks (`overrides`: [`Overrides`]), the run assembled from a
//! job (`run`: [`to_run`]) with its notes (`notes`), and format 1 out (`runs_file`:
//! [`render`]). What a log does not state stays `null`, with a note naming it; a run with a
//! `null` that format 1 needs parses only once it is filled in.

pub mod deepspeed;
mod error;
mod job;
mod launcher;
mod lines;
pub mod megatron;
pub mod nemo;
mod notes;
mod overrides;
mod run;
mod runs_file;
mod steady_state;
#[cfg(test)]
mod tests;
pub mod torchtitan;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::error::TunerError;

pub use error::JobError;
pub use job::{state, ClusterFacts, Family, Job, LayoutFacts, Measure, ModelFacts, Stated, Step};
pub use overrides::Overrides;
pub use run::{to_run, JobRun};
pub use runs_file::{render, ClusterOut, LayoutOut, ModelOut, ObservedOut, RunOut};
pub use steady_state::{steady_state, warmup_lines, SteadyState};

/// The most of a log read: a run of a few hundred thousand iterations logs tens of MB; cut a
/// larger one to its head and tail (`head -c`, `tail -c`) first.
pub const LOG_BYTES: u64 = 512 << 20;

/// Reads `path` within [`LOG_BYTES`]. Bytes that are not UTF-8 become U+FFFD with a note
/// rather than refusing the file: a log cut mid-character or holding a stray binary byte is
/// still a log.
pub fn read_log_file(path: &Path) -> Result<(String, Option<String>), TunerError> {
    let name = path.display().to_string();
    let io = |e: std::io::Error| TunerError::Io {
        path: name.clone(),
        message: e.to_string(),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(LOG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > LOG_BYTES {
        return Err(TunerError::Io {
            path: name,
            message: format!(
                "larger than {} MiB, the most the tuner reads of a training log: cut it to its head and tail",
                LOG_BYTES >> 20
            ),
        });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, None)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            Ok((
                text,
                Some(format!(
                    "not UTF-8 from byte {at}: such bytes read as U+FFFD"
                )),
            ))
        }
    }
}

/// Reads a log of any family: the first reader, in the order Megatron-LM, NeMo, torchtitan,
/// DeepSpeed, that finds a usable iteration line wins (Megatron-DeepSpeed prints both
/// Megatron's time per iteration and DeepSpeed's samples per second; the direct time wins).
pub fn read_log(text: &str, file: &str) -> Result<Job, JobError> {
    let mut detail = String::new();
    let readers: [fn(&str) -> Option<Job>; 4] = [
        megatron::read,
        nemo::read,
        torchtitan::read,
        deepspeed::read,
    ];
    for read in readers {
        let Some(mut job) = read(text) else { continue };
        if job.steps.is_empty() {
            for s in &job.skipped {
                detail.push_str("; ");
                detail.push_str(s);
            }
            continue;
        }
        job.date = lines::first_date(text);
        launcher::facts(text, &mut job);
        return Ok(job);
    }
    Err(JobError::NoIterations {
        file: file.to_string(),
        detail,
    })
}

/// Every log in `paths` as a run, in order, and the notes for stderr: the library half of
/// `tuner jobs-from-logs`. The first log that cannot become a run stops it, named.
pub fn jobs_from_logs(paths: &[&Path], o: &Overrides) -> Result<(String, Vec<String>), JobError> {
    o.check()?;
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        let file = path.display().to_string();
        let (text, lossy) = read_log_file(path)?;
        if let Some(n) = lossy {
            notes.push(format!("{file}: {n}"));
        }
        let job = read_log(&text, &file)?;
        let base = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "job".into());
        // Two logs with one stem (run1/train.log, run2/train.log) get -2, -3: ids are unique.
        let mut stem = base.clone();
        let mut k = 1;
        while ids.contains_key(&stem) {
            k += 1;
            stem = format!("{base}-{k}");
        }
        ids.insert(stem.clone(), file.clone());
        let r = to_run(&job, &file, &stem, o)?;
        notes.push(format!(
            "{file}: {} log, {} iteration lines",
            job.family.name(),
            job.steps.len()
        ));
        notes.extend(r.notes.iter().map(|n| {
            if n.starts_with(&stem) {
                n.clone()
            } else {
                format!("{file}: {n}")
            }
        }));
        runs.push(r.run);
    }
    Ok((render(&runs)?, notes))
}
