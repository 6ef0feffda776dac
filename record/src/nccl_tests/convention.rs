//! How nccl-tests names and sizes things: binary names, type names, reduction operators,
//! the `count` column, and the time format. Shared by the parser and the writer so that what
//! one writes the other reads.

use crate::{Dtype, Kind};

/// nccl-tests binaries meshfit understands, by the stem before `_perf`.
const BINARIES: &[(&str, Kind)] = &[
    ("all_reduce", Kind::AllReduce),
    ("all_gather", Kind::AllGather),
    ("reduce_scatter", Kind::ReduceScatter),
    ("alltoall", Kind::AllToAll),
    ("sendrecv", Kind::SendRecv),
];

/// nccl-tests binaries whose collectives meshfit does not model; named in errors.
const OTHER_BINARIES: &[&str] = &["broadcast", "reduce", "gather", "scatter", "hypercube"];

/// nccl-tests type names (old and new spellings) and what they store.
const TYPES: &[(&str, Dtype)] = &[
    ("int8", Dtype::Int8),
    ("char", Dtype::Int8),
    ("uint8", Dtype::Uint8),
    ("int32", Dtype::Int32),
    ("int", Dtype::Int32),
    ("uint32", Dtype::Uint32),
    ("int64", Dtype::Int64),
    ("uint64", Dtype::Uint64),
    ("half", Dtype::Fp16),
    ("float", Dtype::Fp32),
    ("double", Dtype::Fp64),
    ("bfloat16", Dtype::Bf16),
    ("f8e4m3", Dtype::Fp8E4m3),
    ("f8e5m2", Dtype::Fp8E5m2),
];

/// What a `<stem>_perf` binary name says about the collective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binary {
    /// A collective meshfit records.
    Known(Kind),
    /// An nccl-tests binary outside meshfit's kinds.
    Other(String),
}

/// Reads a token like `./build/all_reduce_perf` or `all_gather_perf`.
pub(crate) fn binary(token: &str) -> Option<Binary> {
    let name = token.rsplit('/').next()?;
    let stem = name.strip_suffix("_perf")?;
    if let Some((_, kind)) = BINARIES.iter().find(|(s, _)| *s == stem) {
        return Some(Binary::Known(*kind));
    }
    OTHER_BINARIES
        .contains(&stem)
        .then(|| Binary::Other(stem.to_string()))
}

/// Reads a collective named in prose before a table, as people label pasted tables:
/// `all_reduce`, `AllReduce:`, `all-gather`, `reducescatter`, `alltoall`, `send_recv`.
pub(crate) fn collective_name(word: &str) -> Option<Kind> {
    let folded: String = word
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match folded.as_str() {
        "allreduce" => Some(Kind::AllReduce),
        "allgather" => Some(Kind::AllGather),
        "reducescatter" => Some(Kind::ReduceScatter),
        "alltoall" => Some(Kind::AllToAll),
        "sendrecv" => Some(Kind::SendRecv),
        _ => None,
    }
}

/// GPUs that come only on baseboards of a fixed size, by a piece of the name NVML reports
/// (and nccl-tests prints in its device list), with the most one node holds. A run with more
/// ranks than that spans nodes. PCIe cards are left out: servers take 2 to 20 of them.
/// Sources: NVIDIA HGX A100 datasheet (4-, 8- and 16-GPU baseboards); DGX-1 (8 V100 SXM2);
/// DGX-2 (16 V100 SXM3); HGX H100 (4 or 8 H100 SXM5, NVML name "H100 80GB HBM3"); GB200
/// NVL72 compute tray (4 GPUs).
const BASEBOARD_GPUS: &[(&str, u32)] = &[
    ("A100-SXM", 16),
    ("V100-SXM2", 8),
    ("V100-SXM3", 16),
    ("H100 80GB HBM3", 8),
    ("H100-SXM", 8),
    ("GB200", 4),
];

/// The most GPUs of this model one node holds, where the model fixes it.
pub(crate) fn gpus_per_node(model: &str) -> Option<u32> {
    BASEBOARD_GPUS
        .iter()
        .find(|(piece, _)| model.contains(piece))
        .map(|(_, n)| *n)
}

/// The binary names meshfit reads, for error messages.
pub(crate) fn known_binaries() -> Vec<String> {
    BINARIES.iter().map(|(s, _)| format!("{s}_perf")).collect()
}

/// The nccl-tests binary stem that measures `kind`, if it is a collective.
pub(crate) fn binary_stem(kind: Kind) -> Option<&'static str> {
    BINARIES.iter().find(|(_, k)| *k == kind).map(|(s, _)| *s)
}

/// The dtype of an nccl-tests `type` column entry.
pub(crate) fn dtype(name: &str) -> Option<Dtype> {
    TYPES.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// The nccl-tests spelling of `dtype` (the first, current one; tf32 travels as float).
pub(crate) fn type_name(dtype: Dtype) -> &'static str {
    let dtype = if dtype == Dtype::Tf32 {
        Dtype::Fp32
    } else {
        dtype
    };
    TYPES
        .iter()
        .find(|(_, d)| *d == dtype)
        .map(|(n, _)| *n)
        .unwrap_or("-")
}

/// The `redop` column nccl-tests prints for `kind` (send/recv prints `sum`, as in real logs).
pub(crate) fn redop(kind: Kind) -> &'static str {
    match kind {
        Kind::AllGather | Kind::AllToAll => "none",
        _ => "sum",
    }
}

/// How many `count` elements make up the `size` column: nccl-tests prints the per-rank
/// share for all-gather, reduce-scatter and all-to-all, and the whole buffer otherwise.
pub(crate) fn counts_per_size(kind: Kind, ranks: u32) -> u64 {
    match kind {
        Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll => u64::from(ranks),
        _ => 1,
    }
}

/// Time in microseconds as nccl-tests prints it: `%7.0f` from 10 ms, `%7.1f` from 100 us,
/// `%7.2f` below (nccl-tests src/common.cu).
pub(crate) fn format_time_us(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{us:7.0}")
    } else if us >= 100.0 {
        format!("{us:7.1}")
    } else {
        format!("{us:7.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_are_read_from_paths() {
        assert_eq!(
            binary("./nccl-tests/build/all_reduce_perf"),
            Some(Binary::Known(Kind::AllReduce))
        );
        assert_eq!(binary("sendrecv_perf"), Some(Binary::Known(Kind::SendRecv)));
        assert_eq!(
            binary("broadcast_perf"),
            Some(Binary::Other("broadcast".into()))
        );
        assert_eq!(binary("all_reduce"), None);
        assert_eq!(binary("foo_perf"), None);
    }

    #[test]
    fn every_collective_has_a_binary_and_types_round_trip() {
        for kind in Kind::ALL.iter().filter(|k| k.is_collective()) {
            let stem = binary_stem(*kind).unwrap();
            assert_eq!(binary(&format!("{stem}_perf")), Some(Binary::Known(*kind)));
        }
        for (name, dt) in TYPES {
            assert_eq!(dtype(type_name(*dt)), Some(*dt), "{name}");
        }
    }

    #[test]
    fn prose_names_and_baseboards() {
        assert_eq!(collective_name("AllReduce:"), Some(Kind::AllReduce));
        assert_eq!(collective_name("all-gather"), Some(Kind::AllGather));
        assert_eq!(collective_name("reduce"), None);
        assert_eq!(gpus_per_node("NVIDIA A100-SXM4-80GB"), Some(16));
        assert_eq!(gpus_per_node("NVIDIA H100 80GB HBM3"), Some(8));
        assert_eq!(gpus_per_node("NVIDIA H100 PCIe"), None);
    }

    #[test]
    fn time_has_the_nccl_tests_precision() {
        assert_eq!(format_time_us(18535.4), "  18535");
        assert_eq!(format_time_us(9306.71), " 9306.7");
        assert_eq!(format_time_us(34.236), "  34.24");
    }
}
