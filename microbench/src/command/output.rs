//! What the commands print and write: nccl-tests tables, GEMM and copy tables, JSON lines,
//! and files written whole, so that a reader never sees half of one.

use anyhow::{anyhow, Context, Result};
use microbench::discovery::Topology;
use microbench::report;
use record::nccl_tests;
use record::{Kind, Record};

use std::io::Write;
use std::path::Path;

/// `records` with the model of the GPU each ran on (its first), so that a file of them says
/// which GPU it measured without a snapshot around it.
pub(super) fn with_gpu_models(records: &[Record], topology: &Topology) -> Vec<Record> {
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

pub(super) fn print_records(records: &[Record], json: bool) -> Result<()> {
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
pub(super) fn json_lines(records: &[Record]) -> Result<String> {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r)?);
        out.push('\n');
    }
    Ok(out)
}

/// Writes to stdout; a closed pipe (`| head`) ends output quietly instead of panicking.
pub(super) fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("writing to stdout")?),
    }
}

/// Writes through a temporary file and a rename, so the agent never reads half a file.
pub(super) fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{}: not a file name", path.display()))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))
}
