//! What can stop the agent from starting or running. Each message names the setting or the
//! file, the value, and what is allowed.

use std::path::PathBuf;

/// The agent's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting with a value outside what is allowed.
    #[error("{field} `{value}`: {expected}")]
    BadValue {
        /// The setting, as its YAML key.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: String,
    },
    /// The YAML configuration file could not be read.
    #[error("config file {0}")]
    ConfigRead(record::InputError),
    /// The YAML configuration file could not be parsed.
    #[error("config file {path}: {message}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key and position serde-saphyr reports.
        message: String,
    },
    /// The state directory cannot be created or written.
    #[error("state_dir `{path}`: not writable: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The state file could not be written.
    #[error("writing state file {path}: {source}")]
    StateWrite {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The listen address cannot be bound.
    #[error("listen `{addr}`: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The calibration child could not be started.
    #[error("starting {program}: {source}")]
    Child {
        /// The microbench binary.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP server failed.
    #[error("HTTP server: {0}")]
    Serve(std::io::Error),
    /// The backend could not be set up or used.
    #[error(transparent)]
    Microbench(#[from] microbench::Error),
    /// Records could not be serialised.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
