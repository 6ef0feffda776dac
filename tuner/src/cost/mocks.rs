//! Kernel and collective models that count, for tests: their times are FLOPs, bytes or calls.

use super::collective::{Collective, CollectiveModel, Source};
use super::compute::ComputeModel;
use crate::placement::GroupSpan;

/// Collectives that cost a fixed time per call, to count calls.
pub struct PerCall(pub f64);

impl CollectiveModel for PerCall {
    fn time_s(&self, _: Collective, g: &GroupSpan, _: f64) -> f64 {
        if g.ranks <= 1 {
            0.0
        } else {
            self.0
        }
    }
    fn source(&self, _: Collective, _: &GroupSpan) -> Source {
        Source::Nominal
    }
}

/// Collectives that cost their wire bytes at 1 GB/s, to count bytes.
pub struct PerWireByte;

impl CollectiveModel for PerWireByte {
    fn time_s(&self, c: Collective, g: &GroupSpan, bytes: f64) -> f64 {
        bytes * c.busbw_factor(g.ranks) / 1e9
    }
    fn source(&self, _: Collective, _: &GroupSpan) -> Source {
        Source::Nominal
    }
}

/// A GPU that runs 1 PFLOP/s on every GEMM and attention and moves 1 TB/s, so that compute
/// times are FLOP and byte counts, behind a host that takes `self.0` seconds to issue a
/// kernel (none for `PER_FLOP`).
pub struct PerFlop(pub f64);

pub const PER_FLOP: PerFlop = PerFlop(0.0);

impl ComputeModel for PerFlop {
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
        2.0 * m * n * k * 1e-15
    }
    fn attention_s(&self, flops: f64, _seq: f64, _head_dim: f64) -> f64 {
        flops * 1e-15
    }
    fn memory_s(&self, bytes: f64) -> f64 {
        bytes * 1e-12
    }
    fn host_s_per_kernel(&self) -> f64 {
        self.0
    }
}
