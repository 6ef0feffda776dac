//! Files the tuner reads, each with a documented bound, so that `/dev/zero` given as
//! `--model`, `--runs` or `--measurements` cannot grow without end. A file is read through
//! its limit and refused past it by name; YAML is parsed within a node budget stated in words.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::TunerError;

/// What a file holds, and the most of it the tuner reads.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// What the file is, for messages ("a runs file").
    pub what: &'static str,
    /// Most bytes read.
    pub bytes: u64,
    /// Most YAML nodes (mappings, sequences and scalars) parsed.
    pub yaml_nodes: usize,
    /// The node budget in the user's terms ("about 90,000 runs").
    pub in_words: &'static str,
}

/// A model YAML file: one model's dozen fields.
pub const MODEL: Limit = Limit {
    what: "a model file",
    bytes: 1 << 20,
    yaml_nodes: 10_000,
    in_words: "one model's fields",
};

/// A runs file: a run is ~1.4 KB and ~45 YAML nodes (data/vtrain-runs.yaml: 720 runs in 1 MB),
/// so 20,000 runs are ~28 MB and 0.9 M nodes.
pub const RUNS: Limit = Limit {
    what: "a runs file",
    bytes: 64 << 20,
    yaml_nodes: 4_000_000,
    in_words: "about 90,000 runs",
};

/// A calibration profile: six knobs and one entry per job (~10 nodes each), 100,000 jobs.
pub const PROFILE: Limit = Limit {
    what: "a profile",
    bytes: 64 << 20,
    yaml_nodes: 2_000_000,
    in_words: "about 100,000 jobs",
};

/// A measurements file (snapshot, JSON lines; a log or table is then held to [`LOG`]): a
/// 1,000-node snapshot of every calibration point is ~60 MB.
pub const MEASUREMENTS: Limit = Limit {
    what: "a measurements file",
    bytes: 256 << 20,
    yaml_nodes: 0,
    in_words: "",
};

/// An nccl-tests log or a CSV table, read through the bound `microbench import` reads them
/// through: their parsers need many times the text (a 234 MB log took 4.1 GB, issue 31, item
/// 13), where a snapshot of the same size is one JSON document.
pub const LOG: Limit = Limit {
    what: "an nccl-tests log or CSV table (as microbench import)",
    bytes: record::MAX_LOG_BYTES,
    yaml_nodes: 0,
    in_words: "",
};

/// Reads `path` as UTF-8 text through `record::read_bounded`, refusing it past `limit.bytes`
/// without reading further.
pub fn read_text(path: &Path, limit: Limit) -> Result<String, TunerError> {
    record::read_bounded(path, limit.bytes).map_err(|e| {
        let message = match e {
            record::InputError::TooLarge { .. } => too_large(limit),
            record::InputError::NotText { offset, .. } => format!(
                "not UTF-8 text (byte {offset} is not): {} is text",
                limit.what
            ),
            record::InputError::Io { source, .. } => source.to_string(),
        };
        TunerError::Io {
            path: path.display().to_string(),
            message,
        }
    })
}

/// Refuses `text` from `origin` past `limit.bytes`, for a file read through a wider bound
/// before its contents told what it is.
pub fn within(text: &str, origin: &str, limit: Limit) -> Result<(), TunerError> {
    if text.len() as u64 <= limit.bytes {
        return Ok(());
    }
    Err(TunerError::Io {
        path: origin.to_string(),
        message: too_large(limit),
    })
}

fn too_large(limit: Limit) -> String {
    format!(
        "larger than {} MiB, the most the tuner reads of {}",
        limit.bytes >> 20,
        limit.what
    )
}

/// Parses YAML within `limit`'s node budget; past it the error says the limit in words.
pub fn yaml<T: DeserializeOwned>(text: &str, origin: &str, limit: Limit) -> Result<T, TunerError> {
    // Every node is one to three parser events (a mapping or sequence opens and closes).
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: limit.yaml_nodes,
            max_events: 3 * limit.yaml_nodes,
        },
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let mut root = &e;
        while let serde_saphyr::Error::WithSnippet { error, .. } = root {
            root = error;
        }
        let message = match root {
            serde_saphyr::Error::Budget { .. } => format!(
                "more than {} YAML nodes, the most the tuner parses of {} ({}): refused so \
                 that a hostile file cannot exhaust memory",
                limit.yaml_nodes, limit.what, limit.in_words
            ),
            _ => with_nearest_key(e.to_string()),
        };
        TunerError::Yaml {
            origin: origin.to_string(),
            message,
        }
    })
}

/// An "unknown field `x`, expected one of a, b" error with the known key nearest to `x` named
/// on its first line, as a misspelled flag is.
fn with_nearest_key(message: String) -> String {
    let Some((_, rest)) = message.split_once("unknown field `") else {
        return message;
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return message;
    };
    let Some((_, expected)) = tail.split_once("expected") else {
        return message;
    };
    let known = expected
        .lines()
        .next()
        .unwrap_or_default()
        .split([',', ' ', '`'])
        .filter(|w| !w.is_empty() && !matches!(*w, "one" | "of" | "or"));
    let Some(near) = crate::similar::similar(field, known).into_iter().next() else {
        return message;
    };
    let end = message.find('\n').unwrap_or(message.len());
    let hint = format!("; the nearest known key is `{near}`");
    format!("{}{hint}{}", &message[..end], &message[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_its_limit() {
        let err = read_text(Path::new("/dev/zero"), MODEL)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "reading /dev/zero: larger than 1 MiB, the most the tuner reads of a model file"
        );
    }

    #[test]
    fn binary_is_not_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bin");
        std::fs::write(&p, [b'a', 0xff, b'b']).unwrap();
        let err = read_text(&p, MODEL).unwrap_err().to_string();
        assert!(err.contains("not UTF-8 text (byte 1 is not)"), "{err}");
    }

    #[test]
    fn a_yaml_past_its_node_budget_says_so_in_words() {
        let small = Limit {
            yaml_nodes: 10,
            in_words: "ten nodes",
            ..MODEL
        };
        let text = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]";
        let err = yaml::<Vec<u32>>(text, "f.yaml", small)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "more than 10 YAML nodes, the most the tuner parses of a model file (ten nodes)"
            ),
            "{err}"
        );
        assert_eq!(
            yaml::<Vec<u32>>("[1, 2]", "f.yaml", small).unwrap(),
            vec![1, 2]
        );
    }
}
