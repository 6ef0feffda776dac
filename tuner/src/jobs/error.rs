//! Why a log could not become a run, split by who is at fault so that the command exits as a
//! usage error where the flags are.

use crate::error::TunerError;

/// Why a log could not become a run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// No line of any family's iteration format (a log of another kind, or one cut before
    /// training began).
    #[error(
        "{file}: no iteration lines (expected Megatron-LM 'elapsed time per iteration (ms)', \
         NeMo 'train_step_timing', torchtitan 'tps', DeepSpeed 'samples/sec'){detail}"
    )]
    NoIterations {
        /// The file.
        file: String,
        /// `; line N: why` for each line that looked like one but was not usable.
        detail: String,
    },
    /// A flag gives a value the log states otherwise.
    #[error("{file}: {flag} {value} contradicts the log: line {line} states {stated} ({what}); leave {flag} out or fix it")]
    Contradicts {
        /// The file.
        file: String,
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// The line that states otherwise.
        line: usize,
        /// What it states.
        stated: String,
        /// The field.
        what: &'static str,
    },
    /// `--warmup` drops every iteration of a log.
    #[error("{file}: --warmup {warmup} drops all {lines} of its iteration lines; give fewer than {lines}")]
    Warmup {
        /// The file.
        file: String,
        /// The flag's value.
        warmup: usize,
        /// Usable iteration lines in the file.
        lines: usize,
    },
    /// A file that does not read.
    #[error(transparent)]
    Input(#[from] TunerError),
}

impl JobError {
    /// Whether the command line is at fault (a flag that contradicts a log, a warm-up longer
    /// than a log), not the log.
    pub fn is_usage(&self) -> bool {
        matches!(self, JobError::Contradicts { .. } | JobError::Warmup { .. })
            || matches!(self, JobError::Input(TunerError::BadInput { .. }))
    }
}
