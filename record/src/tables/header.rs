//! A table's header: which quantity each column holds and in which unit, as people write
//! them (`time(ns)`, `time_us`, `busbw (GB/s)`, `TFLOP/s`, `size(B)`, `#wrong`).

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    /// Per-rank buffer, nccl-tests' `size`.
    Size,
    /// Elements, nccl-tests' `count`.
    Count,
    /// nccl-tests' element `type`, or a GEMM's or attention call's `dtype`.
    Type,
    /// A time per call.
    Time,
    /// Algorithm bandwidth.
    Algbw,
    /// Bus bandwidth.
    Busbw,
    /// nccl-tests' `#wrong` (or the old `error`) column.
    Wrong,
    /// The collective, where one table holds several.
    Collective,
    /// The rank count.
    Ranks,
    /// GEMM rows of A and C.
    M,
    /// GEMM columns of B and C.
    N,
    /// GEMM inner dimension.
    K,
    /// Batched GEMMs per call, or sequences per attention call.
    Batch,
    /// GEMM operand layout (tn, nn, nt).
    Layout,
    /// Whether A is transposed (T or N), where a sweep writes the layout in two columns.
    TransA,
    /// Whether B is transposed.
    TransB,
    /// Achieved FLOP/s.
    Flops,
    /// Tokens per sequence of an attention call.
    Seq,
    /// Query heads of an attention call.
    Heads,
    /// Width of one head.
    HeadDim,
    /// Whether an attention mask is causal.
    Causal,
    /// The attention pass timed (fwd, bwd, fwd_bwd).
    Pass,
    /// The GPU model.
    Gpu,
    /// nccl-tests' reduction operator and root: read past.
    Ignored,
}

/// A unit as a factor to the base unit of its quantity (seconds, bytes, bytes/s, FLOP/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unit {
    /// Base units per unit.
    pub factor: f64,
    /// How the header spelled it.
    pub spelled: &'static str,
}

/// One column of the header.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// What it holds; `None` for a column this reader does not know.
    pub name: Option<Name>,
    /// Its unit, where the header gave one.
    pub unit: Option<Unit>,
    /// The header cell as written.
    pub raw: String,
}

const TIME: &[(&str, f64)] = &[
    ("s", 1.0),
    ("sec", 1.0),
    ("ms", 1e-3),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("usec", 1e-6),
    ("ns", 1e-9),
];
const SIZE: &[(&str, f64)] = &[
    ("b", 1.0),
    ("bytes", 1.0),
    ("byte", 1.0),
    ("kb", 1e3),
    ("kib", 1024.0),
    ("mb", 1e6),
    ("mib", 1048576.0),
    ("gb", 1e9),
    ("gib", 1073741824.0),
];
/// Gb/s, Gbit/s and Gbps are bits, as network rates are written; GB/s is bytes (nccl-tests).
const RATE: &[(&str, f64)] = &[
    ("b/s", 1.0),
    ("mb/s", 1e6),
    ("mib/s", 1048576.0),
    ("gb/s", 1e9),
    ("gib/s", 1073741824.0),
    ("tb/s", 1e12),
    ("gbit/s", 1.25e8),
    ("gbps", 1.25e8),
];
/// A bare `flops` is not here: it is as often a count of FLOPs as a rate.
const FLOPS: &[(&str, f64)] = &[
    ("flop/s", 1.0),
    ("gflop/s", 1e9),
    ("gflops", 1e9),
    ("tflop/s", 1e12),
    ("tflops", 1e12),
    ("pflop/s", 1e15),
    ("pflops", 1e15),
];

/// Spellings of each name, folded to lowercase letters, digits and `_`.
const NAMES: &[(&str, Name)] = &[
    ("size", Name::Size),
    ("bytes", Name::Size),
    ("msg_size", Name::Size),
    ("message_size", Name::Size),
    ("count", Name::Count),
    ("type", Name::Type),
    ("dtype", Name::Type),
    ("precision", Name::Type),
    ("data_type", Name::Type),
    ("datatype", Name::Type),
    ("time", Name::Time),
    ("latency", Name::Time),
    ("avg_time", Name::Time),
    ("time_avg", Name::Time),
    ("duration", Name::Time),
    ("median", Name::Time),
    ("mean", Name::Time),
    ("avg", Name::Time),
    ("median_time", Name::Time),
    ("mean_time", Name::Time),
    ("runtime", Name::Time),
    ("elapsed", Name::Time),
    ("kernel_time", Name::Time),
    ("algbw", Name::Algbw),
    ("alg_bw", Name::Algbw),
    ("busbw", Name::Busbw),
    ("bus_bw", Name::Busbw),
    ("wrong", Name::Wrong),
    ("error", Name::Wrong),
    ("collective", Name::Collective),
    ("ranks", Name::Ranks),
    ("nranks", Name::Ranks),
    ("world_size", Name::Ranks),
    ("ngpus", Name::Ranks),
    ("m", Name::M),
    ("n", Name::N),
    ("k", Name::K),
    ("batch", Name::Batch),
    ("batch_size", Name::Batch),
    ("b", Name::Batch),
    ("layout", Name::Layout),
    ("transa", Name::TransA),
    ("trans_a", Name::TransA),
    ("transb", Name::TransB),
    ("trans_b", Name::TransB),
    ("flops", Name::Flops),
    ("throughput", Name::Flops),
    ("seq", Name::Seq),
    ("seqlen", Name::Seq),
    ("seq_len", Name::Seq),
    ("seqlen_q", Name::Seq),
    ("sequence_length", Name::Seq),
    ("heads", Name::Heads),
    ("nheads", Name::Heads),
    ("num_heads", Name::Heads),
    ("n_heads", Name::Heads),
    ("head_dim", Name::HeadDim),
    ("headdim", Name::HeadDim),
    ("d_head", Name::HeadDim),
    ("causal", Name::Causal),
    ("pass", Name::Pass),
    ("direction", Name::Pass),
    ("mode", Name::Pass),
    ("gpu", Name::Gpu),
    ("device", Name::Gpu),
    ("redop", Name::Ignored),
    ("op", Name::Ignored),
    ("root", Name::Ignored),
];

/// The units a quantity takes, for messages and lookups.
fn units_of(name: Name) -> Option<(&'static [(&'static str, f64)], &'static str)> {
    match name {
        Name::Time => Some((TIME, "a time unit (s, ms, us, ns)")),
        Name::Size => Some((SIZE, "a size unit (B, KB, KiB, MB, MiB, GB, GiB)")),
        Name::Algbw | Name::Busbw => Some((
            RATE,
            "a bandwidth unit (GB/s, GiB/s, MB/s, TB/s; Gbit/s or Gbps for bits)",
        )),
        Name::Flops => Some((
            FLOPS,
            "a FLOP rate unit (FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s)",
        )),
        _ => None,
    }
}

fn lookup(table: &'static [(&'static str, f64)], unit: &str) -> Option<Unit> {
    table
        .iter()
        .find(|(s, _)| *s == unit)
        .map(|&(spelled, factor)| Unit { factor, spelled })
}

/// Reads one header cell; an unknown unit on a known quantity is an error naming both.
pub(crate) fn column(cell: &str) -> Result<Column, String> {
    let raw = cell.trim().to_string();
    let lower = raw.to_lowercase();
    let lower = lower.trim_start_matches('#').trim();
    // `name(unit)` or `name [unit]`.
    let (name_part, unit_part) = match lower.find(['(', '[']) {
        Some(i) => {
            let unit = lower[i + 1..].trim_end_matches([')', ']']).trim();
            (lower[..i].trim(), Some(unit.replace(' ', "")))
        }
        None => (lower, None),
    };
    let folded: String = name_part
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    let folded = folded.trim_matches('_').to_string();
    // A unit in the name itself: `tflops`, `TFLOP/s`, `achieved_tflops`, `gflops_per_s`.
    if unit_part.is_none() {
        let compact = name_part.replace(' ', "");
        let unit = lookup(FLOPS, &compact).or_else(|| {
            ["pflop", "tflop", "gflop"]
                .iter()
                .find(|p| compact.contains(*p))
                .and_then(|p| lookup(FLOPS, &format!("{p}/s")))
        });
        if let Some(unit) = unit {
            return Ok(Column {
                name: Some(Name::Flops),
                unit: Some(unit),
                raw,
            });
        }
    }
    let known = |s: &str| NAMES.iter().find(|(n, _)| *n == s).map(|&(_, n)| n);
    let (name, unit) = match (known(&folded), unit_part) {
        (Some(name), unit) => (Some(name), unit),
        // `time_us`, `size_bytes`, `busbw_gbps`: a known name and a unit after its last `_`.
        (None, None) => match folded.rsplit_once('_') {
            Some((stem, suffix)) if known(stem).is_some_and(|n| units_of(n).is_some()) => {
                (known(stem), Some(suffix.to_string()))
            }
            _ => (None, None),
        },
        (None, Some(_)) => (None, None),
    };
    let unit = match (name, unit) {
        (Some(n), Some(u)) => match units_of(n) {
            Some((table, words)) => {
                let found = lookup(table, &u)
                    .ok_or_else(|| format!("column `{raw}`: unit `{u}` is not {words}"))?;
                Some(with_bits(n, found, &raw).map_err(|e| format!("column `{raw}`: {e}"))?)
            }
            None => None,
        },
        _ => None,
    };
    Ok(Column { name, unit, raw })
}

/// The unit as the header wrote it, case kept: inside `(...)` or `[...]`, else after the
/// name's last `_`.
fn unit_as_written(raw: &str) -> &str {
    let raw = raw.trim_start_matches('#').trim();
    match raw.find(['(', '[']) {
        Some(i) => raw[i + 1..].trim_end_matches([')', ']']).trim(),
        None => raw.rsplit_once('_').map_or("", |(_, u)| u),
    }
}

/// Whether a unit as written counts bits: a lowercase `b` after a decimal prefix (`Gb/s`,
/// `Mbps`, `Kb`), as network rates are written; `GB/s` and `kB` are bytes.
fn counts_bits(unit: &str) -> bool {
    let u: Vec<char> = unit.chars().filter(|c| !c.is_whitespace()).collect();
    u.len() >= 2 && "kKmMgGtT".contains(u[0]) && u[1] == 'b'
}

/// `found`, read case-sensitively: a rate written in bits is an eighth of the bytes its
/// lowercase spelling names; a size written in bits is refused.
fn with_bits(name: Name, found: Unit, raw: &str) -> Result<Unit, String> {
    let written = unit_as_written(raw);
    if !counts_bits(written) {
        return Ok(found);
    }
    match name {
        Name::Size => Err(format!(
            "unit `{written}` counts bits: write B, KB, MB or GB for bytes"
        )),
        Name::Algbw | Name::Busbw
            if !found.spelled.contains("bit") && !found.spelled.ends_with("ps") =>
        {
            Ok(Unit {
                factor: found.factor / 8.0,
                ..found
            })
        }
        _ => Ok(found),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(cell: &str) -> (Option<Name>, Option<f64>) {
        let c = column(cell).unwrap();
        (c.name, c.unit.map(|u| u.factor))
    }

    #[test]
    fn units_as_people_write_them() {
        assert_eq!(read("time(ns)"), (Some(Name::Time), Some(1e-9)));
        assert_eq!(read("time_us"), (Some(Name::Time), Some(1e-6)));
        assert_eq!(read(" Time [ms] "), (Some(Name::Time), Some(1e-3)));
        assert_eq!(read("busbw(GB/s)"), (Some(Name::Busbw), Some(1e9)));
        assert_eq!(read("size(B)"), (Some(Name::Size), Some(1.0)));
        assert_eq!(read("TFLOP/s"), (Some(Name::Flops), Some(1e12)));
        assert_eq!(read("tflops"), (Some(Name::Flops), Some(1e12)));
        assert_eq!(read("#wrong"), (Some(Name::Wrong), None));
        assert_eq!(read("time"), (Some(Name::Time), None));
        assert_eq!(read("comment"), (None, None));
        assert_eq!(read("achieved_tflops"), (Some(Name::Flops), Some(1e12)));
        assert_eq!(read("median_us"), (Some(Name::Time), Some(1e-6)));
        assert_eq!(read("Precision"), (Some(Name::Type), None));
        assert_eq!(read("transB"), (Some(Name::TransB), None));
        // Bits where a prefix takes a lowercase b, bytes where it takes B.
        assert_eq!(read("busbw(Gb/s)"), (Some(Name::Busbw), Some(1.25e8)));
        assert_eq!(read("algbw (Mb/s)"), (Some(Name::Algbw), Some(1.25e5)));
        assert_eq!(read("busbw_Gbps"), (Some(Name::Busbw), Some(1.25e8)));
        assert_eq!(read("busbw(GB/s)"), (Some(Name::Busbw), Some(1e9)));
        assert_eq!(read("size(kB)"), (Some(Name::Size), Some(1e3)));
        assert!(column("size(Mb)").unwrap_err().contains("counts bits"));
        // A bare flops is a rate or a count: it names no unit.
        assert_eq!(read("flops"), (Some(Name::Flops), None));
    }

    #[test]
    fn an_unknown_unit_names_the_column_and_the_units_allowed() {
        let err = column("time(fortnights)").unwrap_err();
        assert_eq!(
            err,
            "column `time(fortnights)`: unit `fortnights` is not a time unit (s, ms, us, ns)"
        );
        assert!(column("busbw(furlongs/s)").unwrap_err().contains("GB/s"));
    }
}
