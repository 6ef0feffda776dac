//! Reading nccl-tests output: finds the result rows, the run context around them (binary name,
//! launch line, `-g`, device list, iteration count), and turns each row half into a [`Record`].
//!
//! The log is taken as people paste it: MPI line prefixes, code fences, NCCL INFO chatter,
//! headers with or without `#`, rows with no header at all, cut-off rows, cut-off device lists
//! and several tables, named or not.

use super::convention::{self, Binary};
use super::launch::{command_line, header_iters, read_device, Device, Launch};
use super::ranks::{self, Evidence, Source};
use super::rows::{drop_failed, read_row, Layout, Row};
use super::{ImportOptions, ParseError, Parsed, TableError, Warning};
use crate::{busbw_factor, Backend, Clock, Group, Kind, Record, Scope, Timing, Versions};
use std::collections::BTreeSet;

/// The most device indices a record lists. Every record carries its group, so a log of R
/// rows and D device lines would need R x D memory; past this many ranks (more than any node
/// holds) a record keeps its rank count and scope and leaves `gpus` empty, which keeps the
/// parser within memory linear in its input (issue 13).
pub const MAX_LISTED_GPUS: u32 = 64;

/// How many rejected rows a [`ParseError::NoValidRows`] spells out; the rest are counted.
const SHOWN_REASONS: usize = 3;

/// What the lines before a table say about the run.
#[derive(Debug, Default)]
struct Context {
    /// Collectives named by `<name>_perf` tokens or plain names, in order of appearance.
    names: Vec<Binary>,
    devices: Vec<Device>,
    /// The distinct hosts of `devices`, kept as they come so each table reads them in O(1).
    hosts: BTreeSet<String>,
    /// GPUs one process drives (`-g`, or nThread x nGpus), when the run is one process.
    single_process_ranks: Option<u32>,
    launch: Option<Launch>,
    iters: Option<u32>,
    nccl_version: Option<String>,
    /// `backend:` and `clock:` from a header microbench wrote; nccl-tests itself prints neither.
    backend: Option<Backend>,
    clock: Option<Clock>,
    /// A table has used this context: the next context line starts a new run.
    used: bool,
    /// A table has used `names`: the next line naming a collective replaces them.
    names_used: bool,
    /// Index in `State::records` of this run's first record, and whether nccl-tests marked
    /// any of its results wrong (for an `Out of bounds values : N FAILED` footer).
    first_record: usize,
    flagged: bool,
    /// Records whose `error` column is past nccl-tests' tolerance for the rank count taken:
    /// the run's `Out of bounds values` footer has the last word, as nccl-tests judged them
    /// with the rank count it ran.
    suspects: Vec<Suspect>,
}

/// A record kept until its run's footer says whether nccl-tests counted it out of bounds.
#[derive(Debug)]
struct Suspect {
    /// Index in `State::records`.
    record: usize,
    /// First row of its table, and its own row.
    table: usize,
    line: usize,
}

impl Context {
    /// Adds names once each: a hostile line repeating a name must not make every later
    /// table pay for it.
    fn name(&mut self, names: Vec<Binary>) {
        for n in names {
            if !self.names.contains(&n) {
                self.names.push(n);
            }
        }
    }
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
    /// Result rows seen, and the first reasons rows were rejected, for the error when none
    /// is left.
    rows_seen: usize,
    reasons: Vec<String>,
    rejected: usize,
    errors: Vec<TableError>,
}

pub(super) fn parse(text: &str, opts: &ImportOptions) -> Result<Parsed, ParseError> {
    if opts.ranks == Some(0) {
        return Err(ParseError::ZeroRanks);
    }
    // A byte order mark from a Windows editor carries nothing (issue 13).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    // A log without a final newline was cut off, as when a job is killed mid-sweep: its last
    // line may hold part of a row, ending part-way through a number.
    let cut_line = (!text.is_empty() && !text.ends_with('\n')).then(|| text.lines().count());
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
        if let Some(failed) = out_of_bounds(&tokens) {
            st.flush(opts);
            if failed == 0 {
                st.ctx.suspects.clear();
            } else {
                st.drop_suspects();
                st.failed_footer(line_no, failed);
            }
        } else if is_column_header(&tokens) || body.starts_with("Avg bus bandwidth") {
            st.flush(opts);
        } else if !trimmed.starts_with('#')
            && cut_line == Some(line_no)
            && tokens[0].parse::<u64>().is_ok()
        {
            st.cut_row(line_no, &tokens, opts);
        } else if !trimmed.starts_with('#') && looks_like_row(&tokens) {
            st.row(line_no, &tokens, opts);
        } else {
            st.context_line(line, &tokens, opts);
        }
    }
    st.flush(opts);
    st.drop_suspects();
    if !st.errors.is_empty() {
        return Err(ParseError::Tables(st.errors));
    }
    if st.records.is_empty() {
        if st.rows_seen == 0 {
            return Err(ParseError::NoTable);
        }
        return Err(ParseError::NoValidRows {
            rows: st.rows_seen,
            rejected: st.rejected,
            reasons: st.reasons,
        });
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

/// `Out of bounds values : N OK|FAILED`, nccl-tests' footer: N values were wrong.
fn out_of_bounds(tokens: &[&str]) -> Option<u64> {
    match tokens {
        ["Out", "of", "bounds", "values", ":", n, ..] => Some(n.parse().unwrap_or(0)),
        _ => None,
    }
}

/// A result row starts with two integers (size, count) and an nccl-tests type name. Digits
/// past what a u64 holds still make a row, which `read_row` then refuses by name, rather than
/// a context line that vanishes without a word.
fn looks_like_row(tokens: &[&str]) -> bool {
    let integer = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    tokens.len() >= 3 && integer(tokens[0]) && integer(tokens[1])
}

impl State {
    fn reject(&mut self, w: Warning) {
        self.rejected += 1;
        if self.reasons.len() < SHOWN_REASONS {
            self.reasons.push(w.to_string());
        }
        self.warnings.push(w);
    }

    fn row(&mut self, line: usize, tokens: &[&str], opts: &ImportOptions) {
        self.take_row(line, read_row(line, tokens), opts);
    }

    /// The row on the last line of a log cut off mid-row. Its last token may be the start of
    /// a longer one (`30.7` of `30.74`, `N/` of `N/A`), so a row that does not read whole is
    /// read without that token: the placement it belonged to is then cut short, and the
    /// out-of-place columns are kept when they are all there. A row cut before its type
    /// column is skipped as cut short.
    fn cut_row(&mut self, line: usize, tokens: &[&str], opts: &ImportOptions) {
        let cut = Ok((
            None,
            Some(Warning::Truncated {
                line,
                kept_out_of_place: false,
            }),
        ));
        let read = match looks_like_row(tokens).then(|| read_row(line, tokens)) {
            Some(Ok(whole)) => Ok(whole),
            _ => match tokens.split_last() {
                Some((_, rest)) if looks_like_row(rest) => read_row(line, rest).or(cut),
                _ => cut,
            },
        };
        self.take_row(line, read, opts);
    }

    fn take_row(
        &mut self,
        line: usize,
        read: Result<(Option<Row>, Option<Warning>), String>,
        opts: &ImportOptions,
    ) {
        self.rows_seen += 1;
        match read {
            Ok((row, truncated)) => {
                match (&row, truncated) {
                    (Some(_), Some(w)) => self.warnings.push(w),
                    (None, Some(w)) => self.reject(w),
                    (None, None) => self.reject(Warning::Unreadable {
                        line,
                        reason: "neither placement has a time (both N/A)".into(),
                    }),
                    (Some(_), None) => {}
                }
                // An all-to-all's or all-gather's share per peer rounds down to 16 bytes, so
                // its smallest sizes print `0 0`: nothing moved, nothing to record.
                if let Some(row) = row.filter(|r| r.size > 0 || r.count > 0) {
                    if self.rows.last().is_some_and(|prev| !row.continues(prev)) {
                        self.flush(opts);
                    }
                    self.rows.push(row);
                }
            }
            Err(reason) => self.reject(Warning::Unreadable { line, reason }),
        }
    }

    fn context_line(&mut self, line: &str, tokens: &[&str], opts: &ImportOptions) {
        let binaries: Vec<Binary> = line
            .split(|c: char| c.is_whitespace() || "`'\"(),;".contains(c))
            .filter_map(convention::binary)
            .collect();
        // NCCL's own chatter names collectives it tunes or traces, not the table's.
        let chatter = line.contains("NCCL INFO") || line.contains("NCCL WARN");
        let plain: Vec<Binary> = if binaries.is_empty() && !chatter {
            line.split(|c: char| c.is_whitespace() || "`'\"(),;:".contains(c))
                .filter_map(convention::collective_name)
                .map(Binary::Known)
                .collect()
        } else {
            Vec::new()
        };
        let command = command_line(tokens);
        let header = tokens.first() == Some(&"nThread");
        let device = tokens.first() == Some(&"Rank") && tokens.contains(&"device");
        let version = line
            .find("NCCL version ")
            .map(|at| &line[at + "NCCL version ".len()..]);
        if binaries.is_empty() && plain.is_empty() && !header && !device && version.is_none() {
            return;
        }
        // Context describes the table that follows it: rows before it are a finished table
        // of the previous run, whose context this line replaces.
        self.flush(opts);
        if !plain.is_empty() && binaries.is_empty() && !header && !device && version.is_none() {
            // A line such as "all_gather result" between tables of one paste names the next
            // table's collective and keeps the rest of the run's context.
            if self.ctx.names_used {
                self.ctx.names.clear();
                self.ctx.names_used = false;
            }
            self.ctx.name(plain);
            return;
        }
        if self.ctx.used {
            self.drop_suspects();
            self.ctx = Context {
                first_record: self.records.len(),
                ..Context::default()
            };
        }
        self.ctx.name(binaries);
        if let Some(command) = command {
            self.ctx.single_process_ranks = command.single_process;
            if command.launch.is_some() {
                self.ctx.launch = command.launch;
            }
            if command.iters.is_some() {
                self.ctx.iters = command.iters;
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
                if !self.ctx.hosts.contains(&d.host) {
                    self.ctx.hosts.insert(d.host.clone());
                }
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
    }

    /// An `Out of bounds values : N FAILED` footer closes the run. When no result of the run
    /// said which values were wrong (`#wrong` printed `N/A`, or the rows were cut), none of
    /// its results can be trusted.
    fn failed_footer(&mut self, line: usize, wrong: u64) {
        if self.ctx.flagged {
            return;
        }
        let start = self.ctx.first_record.min(self.records.len());
        let dropped = self.records.len() - start;
        self.records.truncate(start);
        self.ctx.flagged = true;
        self.reject(Warning::FailedRun {
            line,
            wrong,
            dropped,
        });
    }

    /// Drops the records whose `error` column is past nccl-tests' tolerance, when no footer
    /// of their run said every value was in bounds.
    fn drop_suspects(&mut self) {
        let suspects = std::mem::take(&mut self.ctx.suspects);
        if suspects.is_empty() {
            return;
        }
        let mut doomed = suspects.iter().map(|s| s.record).peekable();
        let mut index = 0;
        self.records.retain(|_| {
            let drop = doomed.next_if_eq(&index).is_some();
            index += 1;
            !drop
        });
        self.ctx.flagged = true;
        for chunk in suspects.chunk_by(|a, b| a.table == b.table) {
            let mut lines: Vec<usize> = chunk.iter().map(|s| s.line).collect();
            lines.dedup();
            self.reject(Warning::Failed {
                table: chunk[0].table,
                lines,
            });
        }
    }

    fn flush(&mut self, opts: &ImportOptions) {
        if self.rows.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.rows);
        let first = rows[0].line;
        let inherited = self.ctx.names_used;
        self.ctx.used = true;
        self.ctx.names_used = true;
        let (rows, failed) = drop_failed(rows);
        if !failed.is_empty() {
            self.ctx.flagged = true;
            self.reject(Warning::Failed {
                table: first,
                lines: failed,
            });
        }
        if rows.is_empty() {
            return;
        }
        match self.table(first, &rows, inherited, opts) {
            Ok((kind, group)) => {
                let versions = Versions {
                    nccl: self.ctx.nccl_version.clone(),
                    ..Versions::default()
                };
                for row in &rows {
                    self.convert(first, row, kind, &group, &versions);
                }
            }
            Err(e) => self.errors.push(e),
        }
    }

    /// The collective and the rank group of the table whose first row is on `first`.
    fn table(
        &mut self,
        first: usize,
        rows: &[Row],
        inherited: bool,
        opts: &ImportOptions,
    ) -> Result<(Kind, Group), TableError> {
        let kind = self.kind(first, rows, inherited, opts)?;
        let ranks = match opts.ranks {
            Some(r) => r,
            None => self.ranks(first, kind, rows)?,
        };
        let scope = self
            .scope(ranks, opts)
            .ok_or(TableError::UnknownScope { line: first })?;
        // A device list that lists every rank gives the devices; a cut one does not. Past
        // MAX_LISTED_GPUS the indices repeat node after node and would cost ranks x rows.
        let listed = ranks <= MAX_LISTED_GPUS;
        let gpus = if listed && self.ctx.devices.len() == ranks as usize {
            self.ctx.devices.iter().map(|d| d.index).collect()
        } else {
            match (self.ctx.single_process_ranks, self.mpi) {
                // nccl-tests takes the first n visible devices.
                (Some(n), false) if listed && n == ranks => (0..ranks).collect(),
                _ => Vec::new(),
            }
        };
        let group = Group {
            node: opts
                .node
                .clone()
                .or_else(|| self.ctx.devices.first().map(|d| d.host.clone())),
            gpus,
            scope,
            ranks,
        };
        Ok((kind, group))
    }

    /// The collective from the names before the table, its columns, and the `--collective`
    /// hint for a table that neither tells. Names `inherited` from an earlier table of the
    /// run (nothing named this one) yield to columns that rule them out: a paste may join
    /// tables of several runs with nothing between them.
    fn kind(
        &mut self,
        line: usize,
        rows: &[Row],
        inherited: bool,
        opts: &ImportOptions,
    ) -> Result<Kind, TableError> {
        let shaped = ranks::structural_kinds(rows);
        let mut known: BTreeSet<Kind> = self
            .ctx
            .names
            .iter()
            .filter_map(|b| match b {
                Binary::Known(k) => Some(*k),
                Binary::Other(_) => None,
            })
            .collect();
        let other: Vec<String> = self
            .ctx
            .names
            .iter()
            .filter_map(|b| match b {
                Binary::Other(s) => Some(format!("{s}_perf")),
                Binary::Known(_) => None,
            })
            .collect();
        if known.is_empty() {
            if let Some(name) = other.first() {
                return Err(TableError::UnsupportedCollective {
                    line,
                    name: name.clone(),
                    supported: convention::known_binaries(),
                });
            }
        }
        let named: Vec<Kind> = known
            .iter()
            .copied()
            .filter(|k| shaped.contains(k))
            .collect();
        if inherited && named.is_empty() {
            known.clear();
        }
        let decided = match (known.len(), named.as_slice()) {
            (0, _) => None,
            (_, [kind]) => Some(*kind),
            (1, []) if opts.collective.is_some_and(|h| shaped.contains(&h)) => opts.collective,
            (1, []) => {
                return Err(TableError::ColumnsContradict {
                    line,
                    named: known.into_iter().collect(),
                    fits: ranks::column_kinds(rows),
                })
            }
            _ if opts.collective.is_some_and(|h| named.contains(&h)) => opts.collective,
            _ => {
                return Err(TableError::AmbiguousCollective {
                    line,
                    names: known.iter().map(ToString::to_string).collect(),
                })
            }
        };
        if let Some(kind) = decided {
            if let Some(hint) = opts.collective.filter(|h| *h != kind) {
                self.warnings
                    .push(Warning::HintNotApplied { line, hint, kind });
            }
            return Ok(kind);
        }
        // Named by nothing: the columns and the printed ratio decide, or the hint.
        let fits = ranks::column_kinds(rows);
        match (opts.collective, fits.as_slice()) {
            (Some(hint), _) if fits.contains(&hint) => Ok(hint),
            (Some(hint), _) => Err(TableError::HintDoesNotFit { line, hint, fits }),
            (None, [kind]) => Ok(*kind),
            (None, _) => Err(TableError::UnknownCollective { line, fits }),
        }
    }

    /// Ranks from what the table's own numbers fix (count vs size, printed busbw/algbw),
    /// then the launch line, a one-process `-g`, and the device list, which an excerpt may
    /// cut. A context figure the numbers or the device list rule out is passed over, with a
    /// warning naming both.
    fn ranks(&mut self, line: usize, kind: Kind, rows: &[Row]) -> Result<u32, TableError> {
        let mut evidence: Vec<Evidence> = Vec::new();
        let table = ranks::table_evidence(kind, rows, &mut evidence);
        if let Some(n) = self.ctx.launch.and_then(|l| l.ranks) {
            evidence.push(Evidence::exact(Source::Launch, n));
        }
        if let (Some(n), false) = (self.ctx.single_process_ranks, self.mpi) {
            evidence.push(Evidence::exact(Source::OneProcess, n));
        }
        if let Ok(n) = u32::try_from(self.ctx.devices.len()) {
            if n > 0 {
                evidence.push(Evidence::exact(Source::Devices, n));
            }
        }
        // A device list may be cut short but never lists more ranks than ran.
        let listed = u32::try_from(self.ctx.devices.len()).unwrap_or(u32::MAX);
        let context = evidence
            .iter()
            .filter(|e| e.source.is_context() && e.span.lo >= listed)
            .find(|e| table.is_none_or(|t| t.contains(e.span.lo)));
        let chosen = match (context, table) {
            (Some(e), _) => e.span.lo,
            (None, Some(t)) if t.lo == t.hi => t.lo,
            _ => {
                return Err(TableError::UnknownRanks {
                    line,
                    kind,
                    evidence,
                })
            }
        };
        if evidence.iter().any(|e| !e.span.contains(chosen)) {
            self.warnings.push(Warning::RanksDisagree {
                line,
                ranks: chosen,
                evidence,
            });
        }
        Ok(chosen)
    }

    /// Several hosts in the device list, a launch over several nodes, or more ranks than a
    /// node of that GPU holds make the run inter-node; a complete one-host device list or
    /// one process without MPI make it intra-node.
    fn scope(&self, ranks: u32, opts: &ImportOptions) -> Option<Scope> {
        if let Some(scope) = opts.scope {
            return Some(scope);
        }
        let devices = &self.ctx.devices;
        let per_node = devices
            .first()
            .and_then(|d| convention::gpus_per_node(&d.model));
        let nodes = self.ctx.launch.and_then(|l| l.nodes);
        if self.ctx.hosts.len() > 1
            || nodes.is_some_and(|n| n > 1)
            || per_node.is_some_and(|p| ranks > p)
        {
            return Some(Scope::InterNode);
        }
        let complete = !devices.is_empty() && devices.len() == ranks as usize;
        if complete || nodes == Some(1) || (self.ctx.single_process_ranks.is_some() && !self.mpi) {
            return Some(Scope::IntraNode);
        }
        None
    }

    fn convert(&mut self, table: usize, row: &Row, kind: Kind, group: &Group, versions: &Versions) {
        let ranks = group.ranks;
        let Some(bytes) = row
            .count
            .checked_mul(row.dtype.size_bytes())
            .and_then(|b| b.checked_mul(convention::counts_per_size(kind, ranks)))
        else {
            self.reject(Warning::Unreadable {
                line: row.line,
                reason: format!(
                    "count `{}` x type size x {ranks} ranks is past 2^64 bytes",
                    row.count
                ),
            });
            return;
        };
        // Old nccl-tests printed the size summed over ranks for some collectives.
        let size_ok = row.size == bytes
            || (row.layout == Layout::Old && bytes.checked_mul(u64::from(ranks)) == Some(row.size));
        if !size_ok {
            self.warnings.push(Warning::SizeMismatch {
                line: row.line,
                size: row.size,
                bytes,
            });
        }
        let factor = busbw_factor(kind, ranks).unwrap_or(1.0);
        for half in &row.halves {
            let timing = Timing::without_spread(
                half.time_us * 1e-6,
                self.ctx.iters,
                self.ctx.clock.unwrap_or(Clock::NcclTests),
            );
            let backend = self.ctx.backend.unwrap_or(Backend::Nccl);
            let mut rec = Record::transfer(kind, backend, group.clone(), bytes, row.dtype, timing);
            // A time of 1e-300 s or a size of 0 reached the fits as NaN curves (issue 31,
            // item 4): held to the ranges of every other reader before the checks below.
            if let Err(invalid) = rec.validate() {
                self.reject(Warning::OutOfRange {
                    line: row.line,
                    invalid,
                });
                continue;
            }
            rec.in_place = half.in_place;
            rec.versions = versions.clone();
            // The device list names the GPU; a log that lists no device says nothing of it.
            rec.detail.gpu_model = self
                .ctx
                .devices
                .first()
                .map(|d| d.model.clone())
                .filter(|m| !m.is_empty());
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
            if half.check.exceeds(row.dtype, ranks) {
                self.ctx.suspects.push(Suspect {
                    record: self.records.len(),
                    table,
                    line: row.line,
                });
            }
            self.records.push(rec);
        }
    }
}
