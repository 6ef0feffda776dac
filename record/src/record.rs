//! The measurement record of `docs/design.md`: one timed point, one JSON line.

use crate::{busbw_factor, Backend, Clock, Dtype, GemmLayout, Kind, Scope};
use serde::{Deserialize, Serialize};

/// One timed point: a collective at one buffer size, a GEMM shape, or a copy.
///
/// All quantities are in base units: bytes, seconds, bytes per second, FLOP per second.
/// `group`, `gemm` and `timing` are flattened, so the JSON has the flat field list of design.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// What was timed.
    pub kind: Kind,
    /// What produced the number; `sim` records are a model, not a measurement.
    pub backend: Backend,
    /// Where it ran and with how many ranks.
    #[serde(flatten)]
    pub group: Group,
    /// Per-rank buffer in bytes, as nccl-tests defines it for each collective (its `size`
    /// column); for copies the buffer copied; for GEMM the bytes of A, B and C.
    pub bytes: u64,
    /// Element type.
    pub dtype: Dtype,
    /// True for nccl-tests' in-place variant (output buffer aliases the input).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
    /// GEMM shape, for `kind = gemm` only.
    #[serde(flatten)]
    pub gemm: Option<Gemm>,
    /// The time and how it was taken.
    #[serde(flatten)]
    pub timing: Timing,
    /// Algorithm bandwidth, bytes / time_s, in bytes per second (not for GEMM).
    pub algbw: Option<f64>,
    /// Bus bandwidth, algbw x [`busbw_factor`], in bytes per second (not for GEMM).
    pub busbw: Option<f64>,
    /// GEMM throughput, 2mnk / time_s, in FLOP per second.
    pub flops: Option<f64>,
    /// When it was measured, in seconds since the Unix epoch; unknown for imported logs.
    pub timestamp: Option<f64>,
    /// Software that produced it.
    #[serde(default)]
    pub versions: Versions,
    /// Extensions beyond design.md's field list, all optional, so older readers and files
    /// keep working.
    #[serde(flatten)]
    pub detail: Detail,
}

/// What design.md's field list does not carry but a reader needs to trust a point: the GEMM
/// operand layout, the SM clock and throttle reasons the point ran under (issue 10), and for
/// multi-node runs the other end of a pair and the ranks per node (issue 12).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Detail {
    /// GEMM operand layout, for `kind = gemm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<GemmLayout>,
    /// SM clock in Hz when the timed loop ended, where the backend reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_hz: Option<f64>,
    /// NVML clock throttle reasons active when the timed loop ended (`none` when there were
    /// none); absent where the backend cannot read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_reasons: Option<Vec<String>>,
    /// For a pairwise inter-node point, the node at the other end (`group.node` is this end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_node: Option<String>,
    /// For an inter-node collective, the ranks on each node (nccl-tests under mpirun with
    /// `-npernode`); with `ranks` it keys the measured inter-node curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks_per_node: Option<u32>,
    /// For a job-wide inter-node collective, every node that took part (`group.node` is rank
    /// 0's), so that a reader leaving a node out can leave out what it took part in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// For a multi-node collective or pair, how many NVLink domains its ranks spanned: 1 when
    /// every rank shared one NVLink fabric (trays of one NVL72 rack), which NCCL then runs over
    /// NVLink rather than the NICs, so the point prices NVLink groups, not the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domains: Option<u32>,
    /// For `kind = attention`, the shape and pass timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionShape>,
    /// The GPU model the point ran on, as NVML or the source names it ("NVIDIA A100-SXM4-80GB"),
    /// where the record itself must say it: a table or log read without a snapshot around it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
}

/// The shape of a timed attention call, in FlashAttention's benchmark terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttentionShape {
    /// Sequences per call.
    pub batch: u64,
    /// Tokens per sequence (queries and keys alike).
    pub seq: u64,
    /// Query heads.
    pub heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// Whether the mask is causal (half the score matrix computed).
    pub causal: bool,
    /// The pass timed.
    pub pass: crate::AttentionPass,
}

impl AttentionShape {
    /// FLOPs of the timed pass as FlashAttention's benchmarks count them: 4 b s^2 h d for the
    /// forward's two matmuls over the full square, halved under a causal mask, the backward at
    /// 2.5 times the forward (Dao 2023, arXiv 2307.08691, section 3.1 and its benchmark script).
    pub fn flop(self) -> f64 {
        let square = 4.0 * self.batch as f64 * (self.seq as f64).powi(2) * self.heads as f64;
        let fwd = square * self.head_dim as f64 / if self.causal { 2.0 } else { 1.0 };
        fwd * match self.pass {
            crate::AttentionPass::Fwd => 1.0,
            crate::AttentionPass::Bwd => 2.5,
            crate::AttentionPass::FwdBwd => 3.5,
        }
    }

    /// Bytes of Q, K, V and the output in 16-bit elements.
    pub fn bytes(self) -> u64 {
        4 * 2 * self.batch * self.seq * self.heads * self.head_dim
    }
}

/// Which devices took part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Host name of the node (rank 0's node for inter-node runs), when known.
    pub node: Option<String>,
    /// Device indices taking part, in rank order; empty when the source does not say.
    pub gpus: Vec<u32>,
    /// One node or several.
    pub scope: Scope,
    /// Number of ranks; for p2p copies, the number of GPUs sending.
    pub ranks: u32,
}

/// GEMM shape: C (m x n) = A (m x k) . B (k x n).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gemm {
    /// Rows of A and C.
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// Columns of A, rows of B.
    pub k: u64,
}

impl Gemm {
    /// Floating-point operations of one multiply: 2mnk (one multiply and one add per term).
    pub fn flop(self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Elements of A, B and C together.
    pub fn elements(self) -> u64 {
        self.m * self.k + self.k * self.n + self.m * self.n
    }

    /// Bytes of A and B in `dtype` and of C in what a GEMM of `dtype` writes
    /// ([`Dtype::gemm_output`]: bf16 for fp8), saturating at `u64::MAX`.
    pub fn bytes(self, dtype: Dtype) -> u64 {
        let inputs = self
            .m
            .saturating_mul(self.k)
            .saturating_add(self.k.saturating_mul(self.n));
        inputs.saturating_mul(dtype.size_bytes()).saturating_add(
            self.m
                .saturating_mul(self.n)
                .saturating_mul(dtype.gemm_output().size_bytes()),
        )
    }
}

/// The time of one point over its iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median time per iteration in seconds. GEMMs and copies: the median of per-iteration
    /// times. Collectives measured by microbench: each of 5 loops (its `kernels::LOOPS`) of
    /// `iters` back-to-back iterations is timed as nccl-tests times its one loop (one timer,
    /// mean per iteration); this is the median of the 5 loop means, and `time_min_s` and
    /// `time_max_s` are the fastest and slowest loop means. Imported nccl-tests logs: the
    /// mean of the one loop nccl-tests timed.
    pub time_s: f64,
    /// Fastest iteration, when known.
    pub time_min_s: Option<f64>,
    /// Slowest iteration, when known.
    pub time_max_s: Option<f64>,
    /// Timed iterations, when known.
    pub iters: Option<u32>,
    /// How the time was taken.
    pub clock: Clock,
}

impl Timing {
    /// A time known as one figure, without its fastest or slowest iteration: an nccl-tests
    /// loop mean, a sim model, a Prometheus sample.
    pub fn without_spread(time_s: f64, iters: Option<u32>, clock: Clock) -> Timing {
        Timing {
            time_s,
            time_min_s: None,
            time_max_s: None,
            iters,
            clock,
        }
    }
}

/// Versions of the software that produced a record; `None` where not known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    /// NVIDIA driver version.
    pub driver: Option<String>,
    /// CUDA driver API version.
    pub cuda: Option<String>,
    /// NCCL version.
    pub nccl: Option<String>,
    /// cuBLASLt version, on GEMM records (`cublasLtGetVersion`); absent when unknown, so
    /// records without it read and write as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublaslt: Option<String>,
}

impl Record {
    /// A collective or a copy: algbw = bytes / time_s and busbw = algbw x factor.
    pub fn transfer(
        kind: Kind,
        backend: Backend,
        group: Group,
        bytes: u64,
        dtype: Dtype,
        timing: Timing,
    ) -> Record {
        let algbw = bytes as f64 / timing.time_s;
        let busbw = busbw_factor(kind, group.ranks).map(|f| algbw * f);
        Record {
            kind,
            backend,
            group,
            bytes,
            dtype,
            in_place: false,
            gemm: None,
            timing,
            algbw: Some(algbw),
            busbw,
            flops: None,
            timestamp: None,
            versions: Versions::default(),
            detail: Detail::default(),
        }
    }

    /// A pairwise inter-node point (issue 12): GPU `rail` of `ends.0` sending to and
    /// receiving from GPU `rail` of `ends.1`, through NIC `rail` of each; two ranks, one per
    /// node, so busbw = algbw.
    pub fn pair(
        backend: Backend,
        ends: (&str, &str),
        rail: u32,
        bytes: u64,
        dtype: Dtype,
        timing: Timing,
    ) -> Record {
        let group = Group {
            node: Some(ends.0.to_string()),
            gpus: vec![rail],
            scope: Scope::InterNode,
            ranks: 2,
        };
        let mut r = Record::transfer(Kind::SendRecv, backend, group, bytes, dtype, timing);
        r.detail.peer_node = Some(ends.1.to_string());
        r.detail.ranks_per_node = Some(1);
        r
    }

    /// Whether the point's ranks crossed nodes over one NVLink fabric (`nvlink_domains` = 1,
    /// the trays of one NVL72 rack): NCCL ran it over NVLink, so it says nothing of the NICs
    /// or the network between domains. False where the domains are unknown.
    pub fn inside_one_nvlink_domain(&self) -> bool {
        self.group.scope == Scope::InterNode && self.detail.nvlink_domains == Some(1)
    }

    /// A GEMM on one GPU: flops = 2mnk / time_s; bytes counts A, B and C.
    pub fn gemm(
        backend: Backend,
        group: Group,
        shape: Gemm,
        dtype: Dtype,
        timing: Timing,
    ) -> Record {
        let bytes = shape.bytes(dtype);
        let mut r = Record::kernel(
            Kind::Gemm,
            backend,
            group,
            bytes,
            dtype,
            shape.flop(),
            timing,
        );
        r.gemm = Some(shape);
        r
    }

    /// An attention call on one GPU: flops = [`AttentionShape::flop`] / time_s.
    pub fn attention(
        backend: Backend,
        group: Group,
        shape: AttentionShape,
        dtype: Dtype,
        timing: Timing,
    ) -> Record {
        let (bytes, flop) = (shape.bytes(), shape.flop());
        let mut r = Record::kernel(Kind::Attention, backend, group, bytes, dtype, flop, timing);
        r.detail.attention = Some(shape);
        r
    }

    /// A kernel on one GPU that executes `flop` FLOPs over `bytes` of operands.
    fn kernel(
        kind: Kind,
        backend: Backend,
        group: Group,
        bytes: u64,
        dtype: Dtype,
        flop: f64,
        timing: Timing,
    ) -> Record {
        Record {
            kind,
            backend,
            group,
            bytes,
            dtype,
            in_place: false,
            gemm: None,
            flops: Some(flop / timing.time_s),
            timing,
            algbw: None,
            busbw: None,
            timestamp: None,
            versions: Versions::default(),
            detail: Detail::default(),
        }
    }
}

/// A record whose numbers cannot describe a measurement.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field} {value}: expected {allowed}")]
pub struct Invalid {
    /// The JSON field, as design.md spells it.
    pub field: &'static str,
    /// The value found.
    pub value: String,
    /// What the field may hold, with its range.
    pub allowed: String,
}

/// `Err` naming `field`, `value` and `allowed` unless `ok`.
fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    allowed: impl Fn() -> String,
) -> Result<(), Invalid> {
    if ok {
        return Ok(());
    }
    Err(Invalid {
        field,
        value: value.to_string(),
        allowed: allowed(),
    })
}

/// A float as a refusal shows it: in exponent form where plain digits would run to hundreds
/// (`1e-300`, not 300 zeros).
fn shown(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-3..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// Seconds since the Unix epoch by this machine's clock.
fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Record {
    /// Checks what serde cannot, against the physical ranges of [`crate::range`] and this
    /// machine's clock: a point timed on no rank, or in a time that is zero, negative or not
    /// finite, would price a term at zero or infinity downstream (issue 13: `ranks: 0` turned
    /// a 20.7 s TP term into 0.32 s), so it is refused where it enters.
    pub fn validate(&self) -> Result<(), Invalid> {
        self.validate_at(now_s())
    }

    /// [`Record::validate`] with the reader's clock at `now_s`, seconds since the Unix epoch.
    pub fn validate_at(&self, now_s: f64) -> Result<(), Invalid> {
        use crate::range::{CLOCK_SKEW_S, EARLIEST_TIMESTAMP_S, MAX_DIM, MAX_RANKS};
        let ranks = self.group.ranks;
        check((1..=MAX_RANKS).contains(&ranks), "ranks", ranks, || {
            format!("1 to {MAX_RANKS} ranks")
        })?;
        check(self.bytes >= 1, "bytes", self.bytes, || {
            "at least 1 byte".into()
        })?;
        self.validate_times()?;
        let dims = self
            .gemm
            .iter()
            .flat_map(|g| [("m", g.m), ("n", g.n), ("k", g.k)]);
        let attention = self.detail.attention.iter().flat_map(|a| {
            [
                ("batch", a.batch),
                ("seq", a.seq),
                ("heads", a.heads),
                ("head_dim", a.head_dim),
            ]
        });
        if let Some(d) = self.detail.nvlink_domains {
            // Every domain holds at least one rank, so there are no more domains than ranks.
            check((1..=ranks).contains(&d), "nvlink_domains", d, || {
                format!("1 to {ranks} (the point's ranks)")
            })?;
        }
        for (field, v) in dims.chain(attention) {
            check((1..=MAX_DIM).contains(&v), field, v, || {
                format!("a dimension of 1 to {MAX_DIM} (2^24)")
            })?;
        }
        if let Some(t) = self.timestamp {
            let latest = now_s + CLOCK_SKEW_S;
            check(
                (EARLIEST_TIMESTAMP_S..=latest).contains(&t),
                "timestamp",
                shown(t),
                || {
                    format!(
                        "seconds since the Unix epoch from {EARLIEST_TIMESTAMP_S} \
                     (2000-01-01) to {latest:.0} (this machine's clock plus one day)"
                    )
                },
            )?;
        }
        let rates = [
            ("algbw", self.algbw),
            ("busbw", self.busbw),
            ("flops", self.flops),
        ];
        for (field, value) in rates {
            if let Some(v) = value {
                check(v.is_finite() && v >= 0.0, field, shown(v), || {
                    "a finite rate of 0 or more".into()
                })?;
            }
        }
        Ok(())
    }

    /// The times, each between [`crate::range::MIN_TIME_S`] and [`crate::range::MAX_TIME_S`].
    fn validate_times(&self) -> Result<(), Invalid> {
        use crate::range::{MAX_TIME_S, MIN_TIME_S};
        let times = [
            ("time_s", Some(self.timing.time_s)),
            ("time_min_s", self.timing.time_min_s),
            ("time_max_s", self.timing.time_max_s),
        ];
        for (field, value) in times {
            if let Some(v) = value {
                check(
                    (MIN_TIME_S..=MAX_TIME_S).contains(&v),
                    field,
                    shown(v),
                    || format!("a time from {MIN_TIME_S:e} s to {MAX_TIME_S:e} s"),
                )?;
            }
        }
        Ok(())
    }
}

/// How many rejected lines a [`JsonLinesError`] spells out; the rest are counted.
const SHOWN_LINES: usize = 5;

/// Why a JSON-lines file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JsonLinesError {
    /// The whole file is one JSON array, as `jq -s` or a hand-made export writes.
    #[error("the file is a JSON array; microbench --json writes one record per line")]
    JsonArray,
    /// Some lines are not valid records; the file is refused whole, because microbench writes
    /// every line and one bad line means the writer or the copy is broken.
    #[error(
        "{bad} of {lines} non-blank lines are not valid measurement records{}: {}",
        if *.bad > .first.len() { format!(" (first {})", .first.len()) } else { String::new() },
        .first.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    BadLines {
        /// Lines refused.
        bad: usize,
        /// Non-blank lines read.
        lines: usize,
        /// The first few refused lines and why.
        first: Vec<LineError>,
    },
}

/// One refused line of a JSON-lines file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What serde or [`Record::validate`] found wrong.
    pub reason: String,
}

/// Reads JSON lines (one record per line; blank lines allowed) as written by `microbench --json`.
///
/// A UTF-8 byte order mark at the start is skipped: editors on Windows add it and it carries
/// nothing. Every line is read before the file is refused, so the error names the first few
/// bad lines and counts them all.
pub fn read_json_lines(text: &str) -> Result<Vec<Record>, JsonLinesError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('[') {
        return Err(JsonLinesError::JsonArray);
    }
    let mut records = Vec::new();
    let mut first = Vec::new();
    let (mut bad, mut lines) = (0, 0);
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        lines += 1;
        let read = serde_json::from_str::<Record>(l)
            .map_err(|e| {
                // serde counts lines within the one line it was given; the column is what helps.
                let at = format!(" at line {} column {}", e.line(), e.column());
                let what = e.to_string();
                let what = what.strip_suffix(&at).unwrap_or(&what);
                format!("not a measurement record: {what} (column {})", e.column())
            })
            .and_then(|r| r.validate().map(|()| r).map_err(|e| e.to_string()));
        match read {
            Ok(r) => records.push(r),
            Err(reason) => {
                bad += 1;
                if first.len() < SHOWN_LINES {
                    first.push(LineError {
                        line: i + 1,
                        reason,
                    });
                }
            }
        }
    }
    if bad > 0 {
        return Err(JsonLinesError::BadLines { bad, lines, first });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(ranks: u32) -> Group {
        Group {
            node: Some("n1".into()),
            gpus: (0..ranks).collect(),
            scope: Scope::IntraNode,
            ranks,
        }
    }

    fn timing(time_s: f64) -> Timing {
        Timing::without_spread(time_s, Some(20), Clock::Host)
    }

    #[test]
    fn transfer_applies_the_busbw_factor() {
        let r = Record::transfer(
            Kind::AllReduce,
            Backend::Sim,
            group(8),
            1_000_000,
            Dtype::Fp32,
            timing(1e-3),
        );
        assert_eq!(r.algbw, Some(1e9));
        assert_eq!(r.busbw, Some(1.75e9));
    }

    #[test]
    fn gemm_counts_two_flop_per_multiply_add() {
        let shape = Gemm {
            m: 8192,
            n: 8192,
            k: 8192,
        };
        let r = Record::gemm(Backend::Sim, group(1), shape, Dtype::Bf16, timing(1.0));
        assert_eq!(r.flops, Some(2.0 * 8192f64.powi(3)));
        assert_eq!(r.bytes, 3 * 8192 * 8192 * 2);
    }

    /// A GEMM record carries cuBLASLt's version; a record without one writes no key, so
    /// files written before the field read and write the same.
    #[test]
    fn the_cublaslt_version_is_kept_and_absent_when_unknown() {
        let versions = Versions {
            cublaslt: Some("12.9.3".into()),
            ..Versions::default()
        };
        let text = serde_json::to_string(&versions).unwrap();
        assert!(text.contains(r#""cublaslt":"12.9.3""#), "{text}");
        assert_eq!(serde_json::from_str::<Versions>(&text).unwrap(), versions);
        let none = serde_json::to_string(&Versions::default()).unwrap();
        assert_eq!(none, r#"{"driver":null,"cuda":null,"nccl":null}"#);
        let old: Versions = serde_json::from_str(&none).unwrap();
        assert_eq!(old.cublaslt, None);
    }

    /// An fp8 GEMM reads A and B at one byte an element and writes C in bf16, two bytes.
    #[test]
    fn fp8_gemm_counts_c_at_two_bytes() {
        let shape = Gemm {
            m: 4096,
            n: 2048,
            k: 1024,
        };
        let r = Record::gemm(Backend::Cuda, group(1), shape, Dtype::Fp8E4m3, timing(1.0));
        assert_eq!(r.bytes, 4096 * 1024 + 1024 * 2048 + 4096 * 2048 * 2);
        let bf16 = Record::gemm(Backend::Cuda, group(1), shape, Dtype::Bf16, timing(1.0));
        assert_eq!(bf16.bytes, shape.elements() * 2);
    }

    #[test]
    fn json_line_has_the_flat_design_fields_and_round_trips() {
        let mut r = Record::transfer(
            Kind::AllGather,
            Backend::Nccl,
            group(4),
            4096,
            Dtype::Bf16,
            timing(2e-5),
        );
        r.in_place = true;
        let line = serde_json::to_string(&r).unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        for field in [
            "kind",
            "backend",
            "node",
            "gpus",
            "scope",
            "ranks",
            "bytes",
            "dtype",
            "time_s",
            "time_min_s",
            "time_max_s",
            "iters",
            "clock",
            "algbw",
            "busbw",
            "flops",
            "timestamp",
            "versions",
            "in_place",
        ] {
            assert!(value.get(field).is_some(), "missing {field} in {line}");
        }
        assert_eq!(value["kind"], "all_gather");
        assert_eq!(
            read_json_lines(&format!("{line}\n\n{line}\n")).unwrap(),
            vec![r.clone(), r]
        );
    }

    #[test]
    fn detail_fields_are_optional_and_round_trip() {
        let plain = Record::transfer(
            Kind::SendRecv,
            Backend::Sim,
            group(2),
            1 << 20,
            Dtype::Bf16,
            timing(1e-4),
        );
        let line = serde_json::to_string(&plain).unwrap();
        assert!(
            !line.contains("peer_node")
                && !line.contains("layout")
                && !line.contains("nodes")
                && !line.contains("nvlink_domains"),
            "{line}"
        );
        let mut r = plain;
        r.detail = Detail {
            layout: Some(GemmLayout::Nt),
            sm_clock_hz: Some(1.98e9),
            throttle_reasons: Some(vec!["sw_power_cap".into()]),
            peer_node: Some("n2".into()),
            ranks_per_node: Some(8),
            nodes: Some(vec!["n0".into(), "n2".into()]),
            nvlink_domains: Some(1),
            attention: None,
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
        };
        let line = serde_json::to_string(&r).unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["layout"], "nt");
        assert_eq!(value["peer_node"], "n2");
        assert_eq!(value["gpu_model"], "NVIDIA H100 80GB HBM3");
        assert_eq!(value["nodes"], serde_json::json!(["n0", "n2"]));
        assert_eq!(value["nvlink_domains"], 1);
        assert_eq!(read_json_lines(&line).unwrap(), vec![r]);
    }

    /// Issue 31, item 10: values no hardware gives, each refused by field, value and range.
    #[test]
    fn r31_10_values_outside_the_physical_ranges_are_refused() {
        let now = 1.7e9;
        let ok = Record::transfer(
            Kind::AllReduce,
            Backend::Nccl,
            group(8),
            1 << 20,
            Dtype::Bf16,
            timing(1e-4),
        );
        ok.validate_at(now).unwrap();
        let refused = |edit: &dyn Fn(&mut Record), field: &str, allowed: &str| {
            let mut r = ok.clone();
            edit(&mut r);
            let e = r.validate_at(now).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(allowed), "{e}");
        };
        refused(
            &|r| r.timing.time_s = 1e-300,
            "time_s",
            "time_s 1e-300: expected a time from 1e-7 s to 1e4 s",
        );
        refused(
            &|r| r.timing.time_max_s = Some(1e308),
            "time_max_s",
            "to 1e4 s",
        );
        refused(&|r| r.group.ranks = u32::MAX, "ranks", "1 to 1048576");
        refused(&|r| r.bytes = 0, "bytes", "at least 1");
        // 8 ranks span 1 to 8 NVLink domains.
        refused(
            &|r| r.detail.nvlink_domains = Some(0),
            "nvlink_domains",
            "nvlink_domains 0: expected 1 to 8 (the point's ranks)",
        );
        refused(
            &|r| r.detail.nvlink_domains = Some(9),
            "nvlink_domains",
            "1 to 8",
        );
        let mut spread = ok.clone();
        spread.detail.nvlink_domains = Some(8);
        spread.validate_at(now).unwrap();
        refused(
            &|r| r.timestamp = Some(1.7e308),
            "timestamp",
            "timestamp 1.7e308:",
        );
        for t in [1e12, 1e15, 1.7e308, 1e6] {
            refused(&|r| r.timestamp = Some(t), "timestamp", "2000-01-01");
        }
        let mut fresh = ok.clone();
        fresh.timestamp = Some(now + 3600.0);
        fresh.validate_at(now).unwrap();
        let huge = Gemm {
            m: 1 << 63,
            n: 1 << 63,
            k: 1 << 63,
        };
        refused(&|r| r.gemm = Some(huge), "m", "1 to 16777216");
    }

    #[test]
    fn bad_json_line_names_its_line() {
        let err = read_json_lines("\n{\"kind\": \"allreduce\"}\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "1 of 1 non-blank lines are not valid measurement records: line 2: not a measurement \
             record: unknown variant `allreduce`, expected one of `gemm`, `all_reduce`, \
             `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, `p2p_copy`, `h2d`, `d2h`, \
             `hbm_copy`, `attention` (column 20)"
        );
    }
}
