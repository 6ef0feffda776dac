//! Pipeline parallelism: the sends between stages and the bubble.

use super::collective::{Collective, CollectiveModel};
use crate::mesh::{Mesh, Schedule};
use crate::placement::Placement;

/// Idle seconds of a pipeline of `p` stages with `v` virtual stages each, one microbatch
/// taking `microbatch_s` on a stage: (p - 1) / v microbatches' time, while the pipeline
/// fills and drains (v = 1 is plain 1F1B).
/// Narayanan et al. 2021, arXiv 2104.04473, §2.2: bubble = (p-1)/m of compute, divided by v.
pub fn bubble_s(p: u32, v: u32, microbatch_s: f64) -> f64 {
    f64::from(p - 1) / f64::from(v) * microbatch_s
}

/// Share of a training step lost to the pipeline bubble with `m` microbatches: for 1F1B
/// ([`bubble_s`]) (p - 1) / (v·m + p - 1), for DualPipe its (p/2 - 1) x 2/3 microbatches
/// (see `timing`) against the m it runs.
pub fn bubble_fraction(mesh: &Mesh, m: u32) -> f64 {
    // In f64: v x m overflows u32 for absurd batches.
    let (p, m, v) = (
        f64::from(mesh.pp),
        f64::from(m),
        f64::from(mesh.virtual_stages),
    );
    let idle = match mesh.schedule {
        Schedule::OneFOneB | Schedule::Combined1F1B => (p - 1.0) / v,
        Schedule::Dualpipe => (p / 2.0 - 1.0) * DUALPIPE_BUBBLE_SHARE,
    };
    idle / (m + idle)
}

/// Share of a rank's microbatch chunks (one virtual stage of one microbatch each) that its
/// schedule runs without another microbatch's chunk beside it, so that their expert-parallel
/// all-to-all stays exposed, on the rank that runs the most:
/// - 1F1B pairs none.
/// - Combined 1F1B: the first rank's warm-up forwards, 2(p - 1) + (v - 1)·p + 1 of the m·v it
///   runs (Megatron-Core's `get_pp_rank_microbatches`, with its default microbatch group of p
///   per virtual stage and the one extra warm-up microbatch combined 1F1B adds), whose
///   backwards drain unpaired as well. Without a pipeline that is the first forward and the
///   last backward (`combined_1f1b_schedule_for_no_pipelining`): one microbatch of m.
/// - DualPipe (`DualPipe.step`, deepseek-ai/DualPipe `dualpipe/dualpipe.py`): a rank runs m
///   forward chunks, m/2 each way, and overlaps a forward with a backward only in steps 4 and
///   5. The first and the last rank run 3p/2 - 1 forwards alone (step 1's 2(p/2 - 1), step
///   2's 2, step 3's p/2 - 1) and as many backwards (steps 3, 5, 6 and 7); a middle rank runs
///   p + 1 alone, as step 4 does not overlap its first pair. That is the most where p = 2,
///   whose two ranks are both middle ones.
pub(super) fn unpaired_share(mesh: &Mesh, m: u32) -> f64 {
    let (p, v, m) = (
        f64::from(mesh.pp),
        f64::from(mesh.virtual_stages),
        f64::from(m),
    );
    let unpaired = match mesh.schedule {
        Schedule::OneFOneB => return 1.0,
        Schedule::Combined1F1B => 2.0 * (p - 1.0) + (v - 1.0) * p + 1.0,
        Schedule::Dualpipe => (1.5 * p - 1.0).max(p + 1.0),
    };
    (unpaired / (m * v)).min(1.0)
}

/// Share of a pipeline's per-microbatch stage time that DualPipe's fill and drain leave idle
/// per pair of stages: DeepSeek-V3's Table 2 gives its bubble as (pp/2 - 1)(F&B + B - 3W),
/// which with the backward twice the forward (B = 2F), its weight half W = F, and an
/// overlapped forward-and-backward pair as long as both (F&B = 3F) is 2F of a 3F microbatch.
pub(super) const DUALPIPE_BUBBLE_SHARE: f64 = 2.0 / 3.0;

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

    fn stages(pp: u32, v: u32, schedule: Schedule) -> Mesh {
        Mesh {
            tp: 1,
            pp,
            dp: 1,
            cp: 1,
            ep: 1,
            microbatch_size: 1,
            virtual_stages: v,
            zero_stage: 0,
            recompute: crate::mesh::Recompute::None,
            sequence_parallel: false,
            schedule,
            edge_stages: None,
            expert_tp: None,
        }
    }

    fn one_f_one_b(p: u32, m: u32, v: u32) -> f64 {
        bubble_fraction(&stages(p, v, Schedule::OneFOneB), m)
    }

    #[test]
    fn bubble_worked_numbers() {
        // Narayanan et al. 2021 §2.2.1: 7/15 at p=8, m=8 and 7/71 at m=64.
        close(one_f_one_b(8, 8, 1), 7.0 / 15.0);
        close(one_f_one_b(8, 64, 1), 7.0 / 71.0);
        // A p=16, m=16 pipeline idles about half the time: 15/31.
        close(one_f_one_b(16, 16, 1), 15.0 / 31.0);
        // Interleaving with v=4 shrinks the bubble (p-1)/(v m) of compute.
        close(one_f_one_b(8, 8, 4), 7.0 / 39.0);
    }

    #[test]
    fn the_bubble_is_its_fraction_of_the_step() {
        // 8 stages, 2 virtual stages, 32 microbatches of 0.5 s each: 3.5 / 2 microbatches idle.
        let bubble = bubble_s(8, 2, 0.5);
        close(bubble, 1.75);
        close(bubble / (32.0 * 0.5 + bubble), one_f_one_b(8, 32, 2));
        close(bubble_s(1, 1, 0.5), 0.0);
    }

    #[test]
    fn dualpipe_idles_a_third_of_1f1b_with_half_the_stage_pairs() {
        // DeepSeek-V3 Table 2 at PP 16: (16/2 - 1)(F&B + B - 3W) = 7 x 2F with B = 2F and
        // W = F, against 1F1B's (16 - 1)(F + B) = 15 x 3F. With 120 microbatches of 3F:
        // 14F / (360F + 14F).
        let dual = bubble_fraction(&stages(16, 1, Schedule::Dualpipe), 120);
        close(dual, 14.0 / 374.0);
        let plain = one_f_one_b(16, 120, 1);
        close(plain, 45.0 / (360.0 + 45.0));
    }

    #[test]
    fn combined_1f1b_leaves_the_warm_up_chunks_unpaired() {
        let combined = |p, v, m| unpaired_share(&stages(p, v, Schedule::Combined1F1B), m);
        // Without a pipeline: the first forward and the last backward, 1 of 8 microbatches.
        close(combined(1, 1, 8), 1.0 / 8.0);
        // PP 8 x v 4 (Megatron-Core's group of 8 microbatches a virtual stage): rank 0 warms
        // up with 2 x 7 + 3 x 8 = 38 chunks, 39 with combined 1F1B's extra one, of 64 x 4.
        close(combined(8, 4, 64), 39.0 / 256.0);
        // Fewer microbatches than the warm-up: nothing pairs.
        close(combined(8, 4, 8), 1.0);
        // Plain 1F1B pairs nothing, however long its steady state.
        close(unpaired_share(&stages(8, 4, Schedule::OneFOneB), 64), 1.0);
        // Its bubble is 1F1B's over the same stages.
        let combined = bubble_fraction(&stages(8, 4, Schedule::Combined1F1B), 64);
        close(combined, one_f_one_b(8, 64, 4));
    }

    #[test]
    fn dualpipe_overlaps_only_its_steady_state() {
        let dualpipe = |p, m| unpaired_share(&stages(p, 1, Schedule::Dualpipe), m);
        // PP 4, 8 microbatches, counted from `step`. Rank 0 runs forwards alone in step 1 (2),
        // step 2 (2) and step 3 (1), pairs in step 4 (2) and step 5 (1), and runs backwards
        // alone in step 3 (1), step 5 (1), step 6 (2) and step 7 (1): 5 of 8 each way. Rank
        // 1, a middle rank, runs step 2's 4 forwards, step 4's first forward and backward and
        // step 6's 4 backwards alone: 5 as well.
        close(dualpipe(4, 8), 5.0 / 8.0);
        // The ISCA '25 rows, PP 16 and 120 microbatches: the first and last ranks run
        // 2 x 7 + 2 + 7 = 23 alone, the middle ones 17.
        close(dualpipe(16, 120), 23.0 / 120.0);
        // PP 2 at its fewest microbatches, 4: both ranks are middle ones, with step 2's 2
        // forwards and step 4's first forward alone.
        close(dualpipe(2, 4), 3.0 / 4.0);
    }
}
