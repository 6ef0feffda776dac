//! The physics of the sim: latency plus size over bandwidth, per NCCL protocol, and a GEMM
//! roofline with wave quantisation. Each function takes plain numbers in base units.

use record::{busbw_factor, Gemm, Kind};

/// NCCL's three wire protocols. LL sends 8-byte words each carrying a 4-byte flag (low
/// latency, half the bandwidth or less), LL128 carries a flag per 128-byte line (~94% of the
/// bandwidth), Simple uses plain stores and a fence per step (highest latency, full bandwidth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Low latency.
    Ll,
    /// Low latency, 128-byte lines.
    Ll128,
    /// Simple.
    Simple,
}

/// Latency per call, latency per ring step, and the share of the bus bandwidth a protocol
/// reaches. Shaped after NCCL's tuning model (src/graph/tuning.cc: base and per-hop latency
/// per protocol, LL capped well below the link rate); the values put the LL -> LL128 change-over
/// near 1 MiB and LL128 -> Simple near 64 MiB for 8 NVSwitch GPUs, where H100 nccl-tests
/// all-reduce curves show their kinks.
const PROTOCOLS: [(Protocol, f64, f64, f64); 3] = [
    (Protocol::Ll, 4.5e-6, 0.6e-6, 0.30),
    (Protocol::Ll128, 7.0e-6, 1.2e-6, 0.90),
    (Protocol::Simple, 12.0e-6, 3.5e-6, 1.0),
];

/// Ring steps a collective takes on n ranks: 2(n-1) for all-reduce (reduce-scatter then
/// all-gather), n-1 for the others, 1 for send/recv.
pub fn steps(kind: Kind, ranks: u32) -> f64 {
    let n = f64::from(ranks.max(1));
    match kind {
        Kind::AllReduce => 2.0 * (n - 1.0),
        Kind::SendRecv => 1.0,
        _ => n - 1.0,
    }
}

/// Time of one collective and the protocol NCCL would pick for it: the fastest of
/// t_p = base_p + steps x hop_p x hop_scale + traffic / (bus_bytes_per_s x share_p), where
/// traffic = bytes x busbw factor (bytes alone for one rank, which copies locally).
/// `hop_scale` stretches per-step latency on slower paths (1 for NVLink, 2 for PCIe).
pub fn collective_time(
    kind: Kind,
    ranks: u32,
    bytes: u64,
    bus_bytes_per_s: f64,
    hop_scale: f64,
) -> (f64, Protocol) {
    let factor = if ranks <= 1 {
        1.0
    } else {
        busbw_factor(kind, ranks).unwrap_or(1.0)
    };
    let traffic = bytes as f64 * factor;
    let hops = steps(kind, ranks);
    PROTOCOLS
        .iter()
        .map(|&(p, base, hop, share)| {
            (
                base + hops * hop * hop_scale + traffic / (bus_bytes_per_s * share),
                p,
            )
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or((f64::INFINITY, Protocol::Simple))
}

/// Kernel launch and tail latency of a GEMM.
const GEMM_LAUNCH_S: f64 = 4e-6;
/// Share of the tensor-core peak the best cuBLAS kernels sustain on large squares (H200 bf16
/// 8192^3: about 790 of 989 TFLOP/s through PyTorch).
const GEMM_PEAK_SHARE: f64 = 0.84;
/// Output tile of the kernels (128 x 256, CUTLASS's usual Hopper and Ampere tile).
const TILE: (u64, u64) = (128, 256);

/// GEMM time: launch + max(compute, memory). Compute is 2mnk over peak x share x wave
/// efficiency x k efficiency; wave efficiency is tiles / (waves x SMs), the idle SMs of the
/// last wave; k efficiency k / (k + 64) charges the main loop's prologue. Memory is the
/// operand bytes over HBM bandwidth.
pub fn gemm_time(
    shape: Gemm,
    element_bytes: u64,
    peak_flops: f64,
    sms: u32,
    hbm_bytes_per_s: f64,
) -> f64 {
    let tiles = shape.m.div_ceil(TILE.0) * shape.n.div_ceil(TILE.1);
    let sms = u64::from(sms.max(1));
    let waves = tiles.div_ceil(sms);
    let wave_eff = tiles as f64 / (waves * sms) as f64;
    let k_eff = shape.k as f64 / (shape.k as f64 + 64.0);
    let compute = shape.flop() / (peak_flops * GEMM_PEAK_SHARE * wave_eff * k_eff);
    let memory = (shape.elements() * element_bytes) as f64 / hbm_bytes_per_s;
    GEMM_LAUNCH_S + compute.max(memory)
}

/// Per-copy setup latency (DMA engine or copy kernel launch).
const COPY_LATENCY_S: f64 = 5e-6;

/// Copy time: latency + bytes / bandwidth.
pub fn copy_time(bytes: u64, bytes_per_s: f64) -> f64 {
    COPY_LATENCY_S + bytes as f64 / bytes_per_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_change_over_with_size() {
        let bw = 382e9;
        let proto = |bytes| collective_time(Kind::AllReduce, 8, bytes, bw, 1.0).1;
        assert_eq!(proto(8), Protocol::Ll);
        assert_eq!(proto(4 << 20), Protocol::Ll128);
        assert_eq!(proto(1 << 30), Protocol::Simple);
    }

    #[test]
    fn large_collectives_approach_the_bus_bandwidth() {
        let bw = 382e9;
        let (t, _) = collective_time(Kind::AllReduce, 8, 8 << 30, bw, 1.0);
        let busbw = (8u64 << 30) as f64 / t * 1.75;
        assert!(busbw < bw && busbw > 0.99 * bw, "{busbw}");
    }

    /// 8192^3 bf16 on an H200 (989.4 TFLOP/s, 132 SMs): about 790 TFLOP/s, as PyTorch measures.
    #[test]
    fn gemm_8192_cubed_matches_the_measured_h200() {
        let shape = Gemm {
            m: 8192,
            n: 8192,
            k: 8192,
        };
        let flops = shape.flop() / gemm_time(shape, 2, 989.4e12, 132, 4.8e12);
        assert!((770e12..810e12).contains(&flops), "{flops}");
    }

    #[test]
    fn skinny_gemms_are_memory_bound_and_small_ones_slow() {
        let flops = |m, n, k| {
            let s = Gemm { m, n, k };
            s.flop() / gemm_time(s, 2, 989.4e12, 132, 3.35e12)
        };
        assert!(flops(8192, 8192, 8192) > 3.0 * flops(256, 256, 256));
        assert!(flops(16, 8192, 8192) < 0.1 * flops(8192, 8192, 8192));
    }
}
