//! Pipeline parallelism: the sends between stages and the bubble.

use super::collective::{Collective, CollectiveModel};
use crate::mesh::Mesh;
use crate::placement::Placement;

/// Idle seconds of a pipeline of `p` stages with `v` virtual stages each, one microbatch
/// taking `microbatch_s` on a stage: (p - 1) / v microbatches' time, while the pipeline
/// fills and drains (v = 1 is plain 1F1B).
/// Narayanan et al. 2021, arXiv 2104.04473, §2.2: bubble = (p-1)/m of compute, divided by v.
pub fn bubble_s(p: u32, v: u32, microbatch_s: f64) -> f64 {
    f64::from(p - 1) / f64::from(v) * microbatch_s
}

/// Share of a training step lost to the pipeline bubble of [`bubble_s`] with `m`
/// microbatches: (p - 1) / (v·m + p - 1).
pub fn bubble_fraction(p: u32, m: u32, v: u32) -> f64 {
    // In f64: v x m overflows u32 for absurd batches.
    let (p, m, v) = (f64::from(p), f64::from(m), f64::from(v));
    (p - 1.0) / (v * m + p - 1.0)
}

/// Pipeline sends of one microbatch of `t` tokens of width `hidden` in bf16: activations
/// forward and gradients back, v times each with interleaving. Without sequence parallelism
/// Megatron's scatter/gather sends 1/t of the activation per TP rank and all-gathers it over
/// TP after the receive (Narayanan et al. 2021 §4.1); with it the activation is already split.
pub(super) fn transfer_s(
    coll: &dyn CollectiveModel,
    mesh: &Mesh,
    placement: &Placement,
    (t, hidden): (f64, f64),
) -> f64 {
    let tp_f = f64::from(mesh.tp);
    let full = t * hidden * 2.0;
    let send = coll.time_s(Collective::SendRecv, &placement.pp, full / tp_f);
    let gather = if mesh.tp > 1 && !mesh.sequence_parallel {
        coll.time_s(Collective::AllGather, &placement.tp, full)
    } else {
        0.0
    };
    2.0 * f64::from(mesh.virtual_stages) * (send + gather)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    #[test]
    fn bubble_worked_numbers() {
        // Narayanan et al. 2021 §2.2.1: 7/15 at p=8, m=8 and 7/71 at m=64.
        close(bubble_fraction(8, 8, 1), 7.0 / 15.0);
        close(bubble_fraction(8, 64, 1), 7.0 / 71.0);
        // A p=16, m=16 pipeline idles about half the time: 15/31.
        close(bubble_fraction(16, 16, 1), 15.0 / 31.0);
        // Interleaving with v=4 shrinks the bubble (p-1)/(v m) of compute.
        close(bubble_fraction(8, 8, 4), 7.0 / 39.0);
    }

    #[test]
    fn the_bubble_is_its_fraction_of_the_step() {
        // 8 stages, 2 virtual stages, 32 microbatches of 0.5 s each: 3.5 / 2 microbatches idle.
        let bubble = bubble_s(8, 2, 0.5);
        close(bubble, 1.75);
        close(bubble / (32.0 * 0.5 + bubble), bubble_fraction(8, 32, 2));
        close(bubble_s(1, 1, 0.5), 0.0);
    }
}
