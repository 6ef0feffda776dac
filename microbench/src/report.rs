//! Tables for people: GEMM and copy records (collectives print as nccl-tests tables through
//! [`record::nccl_tests::write`]), and a summary of the best figures of a run.

use crate::discovery::Topology;
use crate::kernels::LOOPS;
use record::{Clock, Kind, Record};
use std::fmt::Write as _;

/// GEMM records as a table: dtype, layout (`-` where the record has none), shape, time in us
/// and TFLOP/s (1e12 FLOP/s).
pub fn gemm_table(records: &[&Record]) -> String {
    let mut out = String::from("#  gpu     dtype  layout          m          n          k      time(us)  min(us)  max(us)   TFLOP/s\n");
    for r in records {
        let Some(shape) = r.gemm else { continue };
        let _ = writeln!(
            out,
            "  {:>4}  {:>8}  {:>6}  {:>9}  {:>9}  {:>9}  {:>12.1}  {:>7.1}  {:>7.1}  {:>8.1}",
            gpus(r),
            r.dtype,
            r.detail.layout.map_or("-", |l| l.as_str()),
            shape.m,
            shape.n,
            shape.k,
            r.timing.time_s * 1e6,
            r.timing.time_min_s.unwrap_or(f64::NAN) * 1e6,
            r.timing.time_max_s.unwrap_or(f64::NAN) * 1e6,
            r.flops.unwrap_or(f64::NAN) / 1e12
        );
    }
    out
}

/// Attention records as a table: shape, pass, time in us and TFLOP/s in FlashAttention's
/// convention.
pub fn attention_table(records: &[&Record]) -> String {
    let mut out = String::from(
        "#  dtype  batch     seq  heads  head_dim  causal     pass      time(us)   TFLOP/s\n",
    );
    for r in records {
        let Some(a) = r.detail.attention else {
            continue;
        };
        let _ = writeln!(
            out,
            "  {:>5}  {:>5}  {:>6}  {:>5}  {:>8}  {:>6}  {:>7}  {:>12.1}  {:>8.1}",
            r.dtype,
            a.batch,
            a.seq,
            a.heads,
            a.head_dim,
            a.causal,
            a.pass,
            r.timing.time_s * 1e6,
            r.flops.unwrap_or(f64::NAN) / 1e12
        );
    }
    out
}

/// Copy records as a table: path, size, time in us, algbw and busbw in GB/s (1e9 B/s).
pub fn copy_table(records: &[&Record]) -> String {
    let mut out = String::from(
        "#      kind     gpus         size(B)      time(us)   algbw(GB/s)   busbw(GB/s)\n",
    );
    for r in records {
        let gbs = |v: Option<f64>| v.unwrap_or(f64::NAN) / 1e9;
        let _ = writeln!(
            out,
            "  {:>8}  {:>7}  {:>14}  {:>12.2}  {:>12.2}  {:>12.2}",
            r.kind,
            gpus(r),
            r.bytes,
            r.timing.time_s * 1e6,
            gbs(r.algbw),
            gbs(r.busbw)
        );
    }
    out
}

/// The p2p bandwidth matrices, one way and both ways, from the largest copy of each pair:
/// row = source GPU, column = destination, in GB/s (both ways: the sum of the directions).
pub fn p2p_matrix(records: &[&Record]) -> String {
    let mut out = String::new();
    for (senders, title) in [(1, "one way"), (2, "both ways (sum of directions)")] {
        let mut best: Vec<(u32, u32, u64, f64)> = Vec::new();
        for r in records
            .iter()
            .filter(|r| r.kind == Kind::P2pCopy && r.group.ranks == senders)
        {
            let (Some(&src), Some(&dst), Some(bw)) =
                (r.group.gpus.first(), r.group.gpus.get(1), r.busbw)
            else {
                continue;
            };
            match best.iter_mut().find(|b| (b.0, b.1) == (src, dst)) {
                Some(b) if b.2 < r.bytes => *b = (src, dst, r.bytes, bw),
                Some(_) => {}
                None => best.push((src, dst, r.bytes, bw)),
            }
        }
        let Some(n) = best.iter().map(|b| b.0.max(b.1) + 1).max() else {
            continue;
        };
        let _ = writeln!(
            out,
            "# P2P bandwidth {title}, GB/s (1e9 B/s), largest size per pair"
        );
        out.push_str("      ");
        for d in 0..n {
            let _ = write!(out, "{:>9}", format!("GPU{d}"));
        }
        out.push('\n');
        for s in 0..n {
            let _ = write!(out, "{:<6}", format!("GPU{s}"));
            for d in 0..n {
                let cell = best
                    .iter()
                    .find(|b| (b.0, b.1) == (s, d) || (senders == 2 && (b.1, b.0) == (s, d)));
                match cell {
                    Some(b) => {
                        let _ = write!(out, "{:>9.2}", b.3 / 1e9);
                    }
                    None => {
                        let _ = write!(out, "{:>9}", "-");
                    }
                }
            }
            out.push('\n');
        }
    }
    out
}

/// The GPUs of a record: `0,1,2,3`, or `0->1` and `0<->1` for p2p copies.
fn gpus(r: &Record) -> String {
    let sep = match (r.kind, r.group.ranks) {
        (Kind::P2pCopy, 2) => "<->",
        (Kind::P2pCopy, _) => "->",
        _ => ",",
    };
    r.group
        .gpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// The best figure per kind (largest busbw, or FLOP/s for GEMM), per GPU group and dtype.
pub fn summary(records: &[Record]) -> String {
    let mut best: Vec<(&Record, f64)> = Vec::new();
    for r in records {
        let value = if matches!(r.kind, Kind::Gemm | Kind::Attention) {
            r.flops
        } else {
            r.busbw
        }
        .unwrap_or(0.0);
        let same = |b: &Record| {
            b.kind == r.kind
                && b.group.gpus == r.group.gpus
                && b.dtype == r.dtype
                && b.group.ranks == r.group.ranks
        };
        match best.iter_mut().find(|(b, _)| same(b)) {
            Some(entry) if entry.1 < value => *entry = (r, value),
            Some(_) => {}
            None => best.push((r, value)),
        }
    }
    let mut out =
        String::from("# Summary (best per kind, GPUs and dtype; GB = 1e9 B, TFLOP = 1e12 FLOP)\n");
    // The nccl-tests tables above print one time per size, as nccl-tests does; say which.
    let timed_here = |r: &&Record| r.kind.is_collective() && r.timing.clock != Clock::NcclTests;
    if let Some(r) = records.iter().find(timed_here) {
        let _ = writeln!(
            out,
            "#   collective time: median of {LOOPS} timed loops of {} back-to-back iterations, \
             each loop's time / iterations as nccl-tests prints its one loop",
            r.timing.iters.map_or("-n".to_string(), |n| n.to_string())
        );
    }
    for (r, value) in best {
        let figure = if matches!(r.kind, Kind::Gemm | Kind::Attention) {
            format!("{:.1} TFLOP/s", value / 1e12)
        } else {
            format!("busbw {:.2} GB/s at {} B", value / 1e9, r.bytes)
        };
        let _ = writeln!(
            out,
            "#   {:<14} {:<8} GPUs {:<16} {figure}  [{}]",
            r.kind,
            r.dtype,
            gpus(r),
            r.backend
        );
    }
    out
}

/// Per-GPU facts under the `topo -m` table: model, memory, PCIe state, clocks; NIC states.
pub fn gpu_details(t: &Topology) -> String {
    let mut out = format!(
        "\nNode {} ({} GPUs{}, source {})\n",
        t.node,
        t.gpus.len(),
        if t.nvswitch { ", NVSwitch" } else { "" },
        t.source
    );
    for g in &t.gpus {
        let pcie = g.pcie.map_or("PCIe n/a".to_string(), |p| {
            let flag = if p.degraded() { "  DEGRADED" } else { "" };
            format!(
                "PCIe gen{}/{} x{}/{}{flag}",
                p.generation, p.generation_max, p.width, p.width_max
            )
        });
        let clock = match (g.clocks.sm_mhz, g.clocks.sm_max_mhz) {
            (Some(c), Some(m)) => format!("SM {c}/{m} MHz"),
            _ => "SM clock n/a".to_string(),
        };
        let _ = writeln!(
            out,
            "  GPU{} {} {:.0} GiB sm_{}{} {} {} NVLinks {} {}",
            g.index,
            g.name,
            g.memory_bytes as f64 / f64::from(1u32 << 30),
            g.compute_capability[0],
            g.compute_capability[1],
            g.pci_bus_id,
            pcie,
            g.nvlinks,
            clock
        );
    }
    for n in &t.nics {
        let rate = n.rate_bytes_per_s.map_or("rate n/a".to_string(), |r| {
            format!("{:.0} Gb/s", r * 8.0 / 1e9)
        });
        let _ = writeln!(
            out,
            "  {} {} {} {}",
            n.name,
            n.state,
            rate,
            n.pci_address.as_deref().unwrap_or("-")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{Backend, Clock, Dtype, Group, Scope, Timing};

    /// A sim transfer of `bytes` among `gpus` with `ranks` senders, timed at `time_s`.
    fn transfer(kind: Kind, gpus: Vec<u32>, ranks: u32, bytes: u64, time_s: f64) -> Record {
        let group = Group {
            node: None,
            gpus,
            scope: Scope::IntraNode,
            ranks,
        };
        let timing = Timing::without_spread(time_s, Some(1), Clock::Model);
        let dtype = if kind == Kind::P2pCopy {
            Dtype::Uint8
        } else {
            Dtype::Bf16
        };
        Record::transfer(kind, Backend::Sim, group, bytes, dtype, timing)
    }

    fn record(bytes: u64, time_s: f64) -> Record {
        transfer(Kind::AllReduce, vec![0, 1], 2, bytes, time_s)
    }

    #[test]
    fn p2p_matrix_has_a_row_per_source() {
        let copy = |src: u32, dst: u32, senders: u32, time_s: f64| {
            transfer(
                Kind::P2pCopy,
                vec![src, dst],
                senders,
                1_000_000_000,
                time_s,
            )
        };
        let records = [
            copy(0, 1, 1, 0.02),
            copy(1, 0, 1, 0.04),
            copy(0, 1, 2, 0.05),
        ];
        let text = p2p_matrix(&records.iter().collect::<Vec<_>>());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], "GPU0          -    50.00");
        assert_eq!(lines[3], "GPU1      25.00        -");
        // Both ways: 2 x 1 GB in 50 ms, shown for the pair in both cells.
        assert_eq!(lines[6], "GPU0          -    40.00");
        assert_eq!(lines[7], "GPU1      40.00        -");
    }

    /// Measured collectives say how their time was taken; imported nccl-tests logs do not
    /// need to (their time is nccl-tests' own).
    #[test]
    fn summary_says_collective_times_are_the_median_loop_mean() {
        let text = summary(&[record(1 << 20, 1e-4)]);
        assert!(
            text.contains(
                "collective time: median of 5 timed loops of 1 back-to-back iterations, \
                 each loop's time / iterations as nccl-tests prints its one loop"
            ),
            "{text}"
        );
        let mut imported = record(1 << 20, 1e-4);
        imported.timing.clock = Clock::NcclTests;
        assert!(!summary(&[imported]).contains("collective time"));
    }

    #[test]
    fn gemm_rows_show_their_layout() {
        let group = Group {
            node: None,
            gpus: vec![0],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        let timing = Timing {
            time_s: 1e-3,
            time_min_s: Some(1e-3),
            time_max_s: Some(1e-3),
            iters: Some(20),
            clock: Clock::Model,
        };
        let shape = record::Gemm {
            m: 8192,
            n: 4096,
            k: 8192,
        };
        let mut r = Record::gemm(Backend::Sim, group, shape, Dtype::Bf16, timing);
        r.detail.layout = Some(record::GemmLayout::Nt);
        let table = gemm_table(&[&r]);
        let row = table.lines().nth(1).unwrap();
        assert!(
            row.starts_with("     0      bf16      nt       8192       4096       8192"),
            "{row}"
        );
    }

    #[test]
    fn summary_keeps_the_best_busbw_per_group() {
        let text = summary(&[
            record(1 << 20, 1e-4),
            record(1 << 30, 1e-2),
            record(1 << 25, 1e-3),
        ]);
        // 2^30 B in 10 ms is 107.37 GB/s, the best of the three; one line per group.
        assert!(
            text.contains("busbw 107.37 GB/s at 1073741824 B  [sim]"),
            "{text}"
        );
        // The title, the timing line, one line for the group.
        assert_eq!(text.lines().count(), 3);
    }
}
