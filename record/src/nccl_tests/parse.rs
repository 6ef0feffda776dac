//! Reading nccl-tests output: finds the result rows, the run context around them (binary name,
//! `-g`, device list, iteration count), and turns each row half into a [`Record`].
//!
//! The log is taken as people paste it: MPI line prefixes, code fences, NCCL INFO chatter,
//! headers with or without `#`, rows with no header at all, cut-off rows and several tables.

use super::convention::{self, Binary};
use super::{ImportOptions, ParseError, Parsed, Warning};
use crate::{busbw_factor, Backend, Clock, Dtype, Group, Kind, Record, Scope, Timing, Versions};
use std::collections::BTreeSet;

/// Column layouts: `New` has `redop` and `root` after `type`; `Old` (before nccl-tests 2.0)
/// does not, and prints `error` instead of `#wrong`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Old,
    New,
}

impl Layout {
    /// Columns before the out-of-place group.
    fn prefix(self) -> usize {
        match self {
            Layout::Old => 3,
            Layout::New => 5,
        }
    }
}

/// Columns per placement: time, algbw, busbw, #wrong.
const GROUP: usize = 4;

/// One placement (out-of-place or in-place) of a row, as printed.
#[derive(Debug, Clone)]
struct Half {
    in_place: bool,
    time_us: f64,
    /// Half a unit in the last printed digit of the time: the rounding it carries.
    time_rounding_us: f64,
    algbw_gbs: f64,
    busbw_gbs: f64,
}

#[derive(Debug, Clone)]
struct Row {
    line: usize,
    layout: Layout,
    size: u64,
    count: u64,
    dtype: Dtype,
    halves: Vec<Half>,
}

#[derive(Debug, Clone)]
struct Device {
    host: String,
    index: u32,
}

/// What the lines before a table say about the run.
#[derive(Debug, Default)]
struct Context {
    /// Collectives named by `<name>_perf` tokens, in order of appearance.
    binaries: Vec<Binary>,
    devices: Vec<Device>,
    /// GPUs one process drives (`-g`, or nThread x nGpus), when the run is one process.
    single_process_ranks: Option<u32>,
    iters: Option<u32>,
    nccl_version: Option<String>,
    /// `backend:` and `clock:` from a header microbench wrote; nccl-tests itself prints neither.
    backend: Option<Backend>,
    clock: Option<Clock>,
    /// A table has used this context: the next context line starts a new run.
    used: bool,
}

/// Parser state over the whole file.
#[derive(Debug, Default)]
struct State {
    ctx: Context,
    rows: Vec<Row>,
    /// Any `[job,rank]<stdout>:` prefix seen: the run used MPI, so it may span nodes.
    mpi: bool,
    records: Vec<Record>,
    warnings: Vec<Warning>,
}

pub(super) fn parse(text: &str, opts: &ImportOptions) -> Result<Parsed, ParseError> {
    if opts.ranks == Some(0) {
        return Err(ParseError::ZeroRanks);
    }

    let mut st = State::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = match strip_mpi_prefix(raw) {
            Some(rest) => {
                st.mpi = true;
                rest
            }
            None => raw,
        };
        let trimmed = line.trim();
        let body = trimmed.trim_start_matches('#').trim();
        let tokens: Vec<&str> = body.split_whitespace().collect();
        if trimmed.starts_with("```") || tokens.is_empty() {
            continue;
        }
        if is_column_header(&tokens)
            || body.starts_with("Avg bus bandwidth")
            || body.starts_with("Out of bounds")
        {
            st.flush(opts)?;
        } else if !trimmed.starts_with('#') && looks_like_row(&tokens) {
            st.row(line_no, &tokens);
        } else {
            st.context_line(line, &tokens, opts)?;
        }
    }
    st.flush(opts)?;
    if st.records.is_empty() {
        return Err(ParseError::NoTable);
    }
    Ok(Parsed {
        records: st.records,
        warnings: st.warnings,
    })
}

/// Strips an Open MPI output tag such as `[1,0]<stdout>:`.
fn strip_mpi_prefix(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('[')?;
    let (tag, rest) = rest.split_once(']')?;
    if !tag.split(',').all(|p| p.trim().parse::<u32>().is_ok()) {
        return None;
    }
    rest.strip_prefix("<stdout>:")
        .or_else(|| rest.strip_prefix("<stderr>:"))
}

fn is_column_header(tokens: &[&str]) -> bool {
    ["time", "algbw", "busbw"]
        .iter()
        .all(|c| tokens.contains(c))
}

/// A result row starts with two integers (size, count) and an nccl-tests type name.
fn looks_like_row(tokens: &[&str]) -> bool {
    tokens.len() >= 3 && tokens[0].parse::<u64>().is_ok() && tokens[1].parse::<u64>().is_ok()
}

impl State {
    fn row(&mut self, line: usize, tokens: &[&str]) {
        match read_row(line, tokens) {
            Ok((row, truncated)) => {
                if let Some(w) = truncated {
                    self.warnings.push(w);
                }
                if let Some(row) = row {
                    self.rows.push(row);
                }
            }
            Err(reason) => self.warnings.push(Warning::Unreadable { line, reason }),
        }
    }

    fn context_line(
        &mut self,
        line: &str,
        tokens: &[&str],
        opts: &ImportOptions,
    ) -> Result<(), ParseError> {
        let binaries: Vec<Binary> = line
            .split(|c: char| c.is_whitespace() || "`'\"(),;".contains(c))
            .filter_map(convention::binary)
            .collect();
        let command = command_binary(tokens).is_some();
        let header = tokens.first() == Some(&"nThread");
        let device = tokens.first() == Some(&"Rank") && tokens.contains(&"device");
        let version = line
            .find("NCCL version ")
            .map(|at| &line[at + "NCCL version ".len()..]);
        if binaries.is_empty() && !header && !device && version.is_none() {
            return Ok(());
        }
        // Context describes the table that follows it: rows before it are a finished table
        // of the previous run, whose context this line replaces.
        self.flush(opts)?;
        if self.ctx.used {
            self.ctx = Context::default();
        }
        self.ctx.binaries.extend(binaries);
        if command {
            let single = !tokens.iter().any(|t| {
                ["mpirun", "mpiexec", "srun"].contains(&t.rsplit('/').next().unwrap_or(t))
            });
            let gpus = flag_value(tokens, &["-g", "--ngpus"]).unwrap_or(1);
            let threads = flag_value(tokens, &["-t", "--nthreads"]).unwrap_or(1);
            if single {
                self.ctx.single_process_ranks = Some(gpus * threads);
            }
            if let Some(n) = flag_value(tokens, &["-n", "--iters"]) {
                self.ctx.iters = Some(n);
            }
        }
        if header {
            if let Some(n) = header_iters(tokens) {
                self.ctx.iters = Some(n);
            }
            let value = |key: &str| {
                tokens
                    .iter()
                    .position(|t| *t == key)
                    .and_then(|at| tokens.get(at + 1))
            };
            self.ctx.backend = value("backend:").and_then(|v| v.parse().ok());
            self.ctx.clock = value("clock:").and_then(|v| v.parse().ok());
        }
        if device {
            if let Some(d) = read_device(tokens) {
                self.ctx.devices.push(d);
            }
        }
        if let Some(v) = version {
            let v = v
                .split(|c: char| c.is_whitespace() || c == '+')
                .next()
                .unwrap_or("");
            if !v.is_empty() {
                self.ctx.nccl_version = Some(v.to_string());
            }
        }
        Ok(())
    }

    fn flush(&mut self, opts: &ImportOptions) -> Result<(), ParseError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let first = rows[0].line;
        let kind = self.kind(first, opts)?;
        let ranks = match opts.ranks {
            Some(r) => r,
            None => self
                .ranks(kind, &rows)
                .ok_or(ParseError::UnknownRanks { line: first, kind })?,
        };
        let scope = self
            .scope(opts)
            .ok_or(ParseError::UnknownScope { line: first })?;
        let group = Group {
            node: opts
                .node
                .clone()
                .or_else(|| self.ctx.devices.first().map(|d| d.host.clone())),
            gpus: self.gpus(ranks),
            scope,
            ranks,
        };
        let versions = Versions {
            nccl: self.ctx.nccl_version.clone(),
            ..Versions::default()
        };
        for row in &rows {
            self.convert(row, kind, &group, &versions);
        }
        self.ctx.used = true;
        Ok(())
    }

    fn kind(&self, line: usize, opts: &ImportOptions) -> Result<Kind, ParseError> {
        if let Some(kind) = opts.collective {
            return Ok(kind);
        }
        let named: BTreeSet<String> = self
            .ctx
            .binaries
            .iter()
            .map(|b| match b {
                Binary::Known(k) => k.to_string(),
                Binary::Other(s) => s.clone(),
            })
            .collect();
        match (named.len(), self.ctx.binaries.first()) {
            (1, Some(Binary::Known(kind))) => Ok(*kind),
            (1, Some(Binary::Other(name))) => Err(ParseError::UnsupportedCollective {
                line,
                name: format!("{name}_perf"),
                supported: convention::known_binaries(),
            }),
            (0, _) => Err(ParseError::UnknownCollective { line }),
            _ => Err(ParseError::AmbiguousCollective {
                line,
                names: named.into_iter().collect(),
            }),
        }
    }

    /// Ranks from the device list, a one-process command line, the count column, or the
    /// printed busbw/algbw ratio, in that order of trust.
    fn ranks(&self, kind: Kind, rows: &[Row]) -> Option<u32> {
        if !self.ctx.devices.is_empty() {
            return u32::try_from(self.ctx.devices.len()).ok();
        }
        if let (Some(n), false) = (self.ctx.single_process_ranks, self.mpi) {
            return Some(n);
        }
        ranks_from_count(kind, rows).or_else(|| ranks_from_ratio(kind, rows))
    }

    fn scope(&self, opts: &ImportOptions) -> Option<Scope> {
        if let Some(scope) = opts.scope {
            return Some(scope);
        }
        if !self.ctx.devices.is_empty() {
            let hosts: BTreeSet<&str> = self.ctx.devices.iter().map(|d| d.host.as_str()).collect();
            return Some(if hosts.len() > 1 {
                Scope::InterNode
            } else {
                Scope::IntraNode
            });
        }
        (self.ctx.single_process_ranks.is_some() && !self.mpi).then_some(Scope::IntraNode)
    }

    /// Device indices from the device list, or 0..n for one process driving n GPUs
    /// (nccl-tests takes the first n visible devices); unknown otherwise.
    fn gpus(&self, ranks: u32) -> Vec<u32> {
        if !self.ctx.devices.is_empty() {
            return self.ctx.devices.iter().map(|d| d.index).collect();
        }
        match (self.ctx.single_process_ranks, self.mpi) {
            (Some(_), false) => (0..ranks).collect(),
            _ => Vec::new(),
        }
    }

    fn convert(&mut self, row: &Row, kind: Kind, group: &Group, versions: &Versions) {
        let ranks = group.ranks;
        let bytes = row.count * row.dtype.size_bytes() * convention::counts_per_size(kind, ranks);
        // Old nccl-tests printed the size summed over ranks for some collectives.
        let size_ok = row.size == bytes
            || (row.layout == Layout::Old && row.size == bytes * u64::from(ranks));
        if !size_ok {
            self.warnings.push(Warning::SizeMismatch {
                line: row.line,
                size: row.size,
                bytes,
            });
        }
        let factor = busbw_factor(kind, ranks).unwrap_or(1.0);
        for half in &row.halves {
            let timing = Timing {
                time_s: half.time_us * 1e-6,
                time_min_s: None,
                time_max_s: None,
                iters: self.ctx.iters,
                clock: self.ctx.clock.unwrap_or(Clock::NcclTests),
            };
            let backend = self.ctx.backend.unwrap_or(Backend::Nccl);
            let mut rec = Record::transfer(kind, backend, group.clone(), bytes, row.dtype, timing);
            rec.in_place = half.in_place;
            rec.versions = versions.clone();
            let algbw = bytes as f64 / half.time_us / 1e3;
            let tolerance = algbw * half.time_rounding_us / half.time_us + 0.005 + 1e-9;
            let busbw = algbw * factor;
            // Old nccl-tests printed busbw in the algbw column of all-gather and
            // reduce-scatter (its algbw counted (n-1)/n of the buffer).
            let legacy = row.layout == Layout::Old
                && matches!(kind, Kind::AllGather | Kind::ReduceScatter)
                && (half.algbw_gbs - busbw).abs() <= tolerance;
            if (half.algbw_gbs - algbw).abs() > tolerance && !legacy {
                self.warnings.push(Warning::AlgbwMismatch {
                    line: row.line,
                    printed: half.algbw_gbs,
                    computed: algbw,
                });
            }
            if (half.busbw_gbs - busbw).abs() > tolerance * factor.max(1.0) {
                self.warnings.push(Warning::BusbwMismatch {
                    line: row.line,
                    printed: half.busbw_gbs,
                    expected: busbw,
                    factor,
                });
            }
            self.records.push(rec);
        }
    }
}

/// Reads a data row. Returns the row (if any half survived) and a truncation warning.
fn read_row(line: usize, tokens: &[&str]) -> Result<(Option<Row>, Option<Warning>), String> {
    let size = tokens[0]
        .parse::<u64>()
        .map_err(|e| format!("size `{}`: {e}", tokens[0]))?;
    let count = tokens[1]
        .parse::<u64>()
        .map_err(|e| format!("count `{}`: {e}", tokens[1]))?;
    let dtype = convention::dtype(tokens[2])
        .ok_or_else(|| format!("type `{}` is not an nccl-tests type", tokens[2]))?;
    let layout = match tokens.get(3) {
        Some(t) if t.parse::<f64>().is_ok() => Layout::Old,
        Some(_) => Layout::New,
        None => {
            return Ok((
                None,
                Some(Warning::Truncated {
                    line,
                    kept_out_of_place: false,
                }),
            ))
        }
    };
    if layout == Layout::New && tokens.get(4).is_some_and(|t| t.parse::<i64>().is_err()) {
        return Err(format!("root `{}` is not an integer", tokens[4]));
    }
    let prefix = layout.prefix();
    if tokens.len() > prefix + 2 * GROUP {
        return Err(format!(
            "{} columns, more than nccl-tests prints ({})",
            tokens.len(),
            prefix + 2 * GROUP
        ));
    }
    let mut halves = Vec::new();
    for (n, in_place) in [false, true].into_iter().enumerate() {
        let start = prefix + n * GROUP;
        if let Some(cols) = tokens.get(start..start + GROUP) {
            halves.push(read_half(cols, in_place)?);
        }
    }
    let truncated = (halves.len() < 2).then_some(Warning::Truncated {
        line,
        kept_out_of_place: !halves.is_empty(),
    });
    let row = (!halves.is_empty()).then_some(Row {
        line,
        layout,
        size,
        count,
        dtype,
        halves,
    });
    Ok((row, truncated))
}

fn read_half(cols: &[&str], in_place: bool) -> Result<Half, String> {
    let num = |name: &str, t: &str| {
        t.parse::<f64>()
            .map_err(|_| format!("{name} `{t}` is not a number"))
    };
    let time_us = num("time", cols[0])?;
    let decimals = cols[0].split_once('.').map_or(0, |(_, frac)| frac.len());
    let half = Half {
        in_place,
        time_us,
        time_rounding_us: 0.5 * 10f64.powi(-i32::try_from(decimals).unwrap_or(0)),
        algbw_gbs: num("algbw", cols[1])?,
        busbw_gbs: num("busbw", cols[2])?,
    };
    if half.time_us.is_nan() || half.time_us <= 0.0 {
        return Err(format!("time `{}` is not positive", cols[0]));
    }
    Ok(half)
}

/// The nccl-tests binary a command line runs, if the line is a command.
fn command_binary(tokens: &[&str]) -> Option<Binary> {
    let first = tokens.first()?.trim_matches(|c| c == '`' || c == '$');
    let launcher =
        ["mpirun", "mpiexec", "srun"].contains(&first.rsplit('/').next().unwrap_or(first));
    if launcher {
        return tokens
            .iter()
            .find_map(|t| convention::binary(t.trim_matches('`')));
    }
    convention::binary(first)
}

fn flag_value(tokens: &[&str], names: &[&str]) -> Option<u32> {
    let at = tokens.iter().position(|t| names.contains(t))?;
    tokens.get(at + 1)?.trim_matches('`').parse().ok()
}

/// The timed iteration count of an nccl-tests header, which also prints `warmup iters:` and
/// `agg iters:`.
fn header_iters(tokens: &[&str]) -> Option<u32> {
    let at = (1..tokens.len())
        .find(|&i| tokens[i] == "iters:" && !["warmup", "agg"].contains(&tokens[i - 1]))?;
    tokens.get(at + 1)?.parse().ok()
}

/// `Rank 0 Group 0 Pid 1478709 on gpu23 device 0 [0x31] NVIDIA A40` (Group is absent in old logs).
fn read_device(tokens: &[&str]) -> Option<Device> {
    let host = tokens.get(tokens.iter().position(|t| *t == "on")? + 1)?;
    let index = tokens
        .get(tokens.iter().position(|t| *t == "device")? + 1)?
        .parse()
        .ok()?;
    Some(Device {
        host: (*host).to_string(),
        index,
    })
}

/// All-gather, reduce-scatter and all-to-all print the per-rank share in `count`, so
/// size / (count x type size) is the rank count (new layout; checked on every row).
fn ranks_from_count(kind: Kind, rows: &[Row]) -> Option<u32> {
    if convention::counts_per_size(kind, 2) == 1 {
        return None;
    }
    let ratios: BTreeSet<u64> = rows
        .iter()
        .filter(|r| {
            r.layout == Layout::New && r.count > 0 && r.size % (r.count * r.dtype.size_bytes()) == 0
        })
        .map(|r| r.size / (r.count * r.dtype.size_bytes()))
        .collect();
    match ratios.iter().collect::<Vec<_>>().as_slice() {
        [n] if **n >= 1 => u32::try_from(**n).ok(),
        _ => None,
    }
}

/// n from busbw/algbw = 2(n-1)/n (all-reduce) or (n-1)/n, read on the row with the largest
/// printed bandwidth (most significant digits). Send/recv's factor 1 says nothing about n.
fn ranks_from_ratio(kind: Kind, rows: &[Row]) -> Option<u32> {
    let best = rows
        .iter()
        .flat_map(|r| &r.halves)
        .max_by(|a, b| a.algbw_gbs.total_cmp(&b.algbw_gbs))?;
    if best.algbw_gbs < 0.1 {
        return None;
    }
    let r = best.busbw_gbs / best.algbw_gbs;
    let n = match kind {
        Kind::AllReduce if r < 1.99 => 2.0 / (2.0 - r),
        Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll if r < 0.99 => 1.0 / (1.0 - r),
        _ => return None,
    };
    ((n - n.round()).abs() < 0.2 && n.round() >= 1.0).then(|| n.round() as u32)
}
