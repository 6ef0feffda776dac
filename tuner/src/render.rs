//! What a command prints: its data for stdout as a table or a versioned JSON or YAML
//! document, and its notes for stderr.

use anyhow::Context;
use clap::ValueEnum;
use record::terminal::escape_controls;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
/// How a command prints its data.
pub(crate) enum Format {
    /// For people (`text`, microbench's name for it, is taken too).
    #[value(alias = "text")]
    Table,
    Json,
    Yaml,
}

/// What a command prints: its data on stdout, and notes (defaults taken, aliases resolved,
/// fallbacks, odd measurements) and warnings (pitfalls of the layouts printed) on stderr, so
/// the data can be piped whatever the notes say.
#[derive(Default)]
pub(crate) struct Output {
    pub(crate) data: String,
    pub(crate) notes: Vec<String>,
    /// Said after the data, each once, so that in a terminal they sit below the table whose
    /// rows refer to them.
    pub(crate) warnings: Vec<String>,
}

impl From<String> for Output {
    fn from(data: String) -> Output {
        Output {
            data,
            ..Output::default()
        }
    }
}

/// Version of every JSON and YAML document the tuner prints, in its `schema_version` field.
/// Raised when a field is removed, renamed or changes meaning; new fields do not raise it.
const SCHEMA_VERSION: u32 = 1;

/// A document with its schema version as the first field.
#[derive(serde::Serialize)]
struct Versioned<'a, T: serde::Serialize> {
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// `value` as a table, or as a JSON or YAML document carrying `schema_version`; `value`
/// must serialize as a map (a struct), so its fields sit beside the version.
pub(crate) fn render<T: serde::Serialize>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<String> {
    let doc = Versioned {
        schema_version: SCHEMA_VERSION,
        body: value,
    };
    Ok(match format {
        // A table shows node names and sources as the files and replies spelled them.
        Format::Table => escape_controls(&table()).into_owned(),
        Format::Json => serde_json::to_string_pretty(&doc)? + "\n",
        Format::Yaml => serde_saphyr::to_string(&doc).context("rendering YAML")?,
    })
}
