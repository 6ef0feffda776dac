//! Errors of the tuner library. Each names the field, the value and what is allowed.

/// What can go wrong in the tuner library.
#[derive(Debug, thiserror::Error)]
pub enum TunerError {
    /// A catalog lookup found nothing.
    #[error("unknown {what} `{name}`; {}", similar_list(.similar))]
    Unknown {
        /// Which catalog: model, gpu or cluster.
        what: &'static str,
        /// The name asked for.
        name: String,
        /// Close names, closest first.
        similar: Vec<String>,
    },
    /// A model shape field is out of range.
    #[error("model `{model}`: {field} = {value}: expected {allowed}")]
    BadModel {
        /// Model name.
        model: String,
        /// Field name.
        field: String,
        /// Offending value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// An input flag or field is out of range.
    #[error("{field} = {value}: expected {allowed}")]
    BadInput {
        /// Flag or field name.
        field: String,
        /// Offending value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// No mesh divides the job.
    #[error("no parallel layout of {model} fits {gpus} GPUs: {reason}")]
    NoMesh {
        /// Model name.
        model: String,
        /// GPU count asked for.
        gpus: u32,
        /// Why, with the smallest count that works where one was found.
        reason: String,
    },
    /// YAML that does not parse or does not match the schema.
    #[error("{origin}: {message}")]
    Yaml {
        /// File name.
        origin: String,
        /// serde-saphyr's message, which carries line and column.
        message: String,
    },
    /// The Prometheus HTTP API refused or failed a query.
    #[error("prometheus {url}: query `{query}`: {message}")]
    Prometheus {
        /// Base URL.
        url: String,
        /// The PromQL.
        query: String,
        /// What went wrong.
        message: String,
    },
    /// A file could not be read.
    #[error("reading {path}: {message}")]
    Io {
        /// File name.
        path: String,
        /// OS error.
        message: String,
    },
}

fn similar_list(similar: &[String]) -> String {
    if similar.is_empty() {
        "no similar names; see `tuner models` and `tuner clusters`".to_string()
    } else {
        format!("similar: {}", similar.join(", "))
    }
}

/// Shorthand for an out-of-range input.
pub fn bad_input(field: &str, value: impl ToString, allowed: &str) -> TunerError {
    TunerError::BadInput {
        field: field.to_string(),
        value: value.to_string(),
        allowed: allowed.to_string(),
    }
}
