//! Why one mesh beats another, in one line, naming the term that differs most.

use crate::cost::timing::TermKind;
use crate::cost::Evaluation;
use crate::placement::{GroupSpan, LinkClass};

fn link(span: &GroupSpan) -> String {
    match span.link {
        LinkClass::Nvlink => "NVLink".to_string(),
        LinkClass::Pcie => "PCIe".to_string(),
        LinkClass::Network if span.nodes > 1 => format!("{} nodes", span.nodes),
        LinkClass::Network => "the network".to_string(),
    }
}

/// What about mesh `e` drives a term, for example "DP=64 across 8 nodes".
pub fn term_cause(term: TermKind, e: &Evaluation) -> String {
    let m = &e.mesh;
    let p = &e.placement;
    match term {
        TermKind::Compute => match m.recompute {
            crate::mesh::Recompute::Full => format!(
                "recompute=full reruns the forward; TP={} mb={}",
                m.tp, m.microbatch_size
            ),
            _ => format!(
                "GEMMs after the TP={} split, mb={}",
                m.tp, m.microbatch_size
            ),
        },
        TermKind::Launch => format!(
            "layer passes issue kernels slower than mb={} at TP={} keeps the GPU busy",
            m.microbatch_size, m.tp
        ),
        TermKind::Straggler => format!("the slowest of {} GPUs sets the step", m.gpus()),
        TermKind::TpComm => format!("TP={} over {}", m.tp, link(&p.tp)),
        TermKind::CpComm => format!("CP={} over {}", m.cp, link(&p.cp)),
        TermKind::EpAllToAll if m.ep == 1 => format!(
            "experts over TP={} gather their tokens over {}",
            m.etp(),
            link(&p.expert_tp)
        ),
        TermKind::EpAllToAll => format!("EP={} over {}", m.ep, link(&p.ep)),
        TermKind::PpP2p => format!("PP={} v={} over {}", m.pp, m.virtual_stages, link(&p.pp)),
        TermKind::PipelineBubble => format!(
            "{:.0}% bubble at PP={} with {} microbatches, v={}",
            e.bubble_fraction * 100.0,
            m.pp,
            e.microbatches,
            m.virtual_stages
        ),
        TermKind::DpGradSync => format!("DP={} across {}", m.dp * m.cp, link(&p.grad)),
        TermKind::ZeroGather => format!(
            "ZeRO-{} over DP={} across {}",
            m.zero_stage,
            m.dp,
            link(&p.dp)
        ),
        TermKind::Optimizer => format!(
            "ZeRO-{} shards the optimizer over {}",
            m.zero_stage,
            if m.zero_stage >= 1 { m.dp } else { 1 }
        ),
    }
}

/// The exposed term that differs most between `upper` (faster) and `lower`, as
/// "+1.9 s exposed DP gradient reduction: DP=64 across 8 nodes".
pub fn why_below(upper: &Evaluation, lower: &Evaluation) -> String {
    let ups = upper.breakdown.terms();
    let lows = lower.breakdown.terms();
    let (name, delta) = ups
        .iter()
        .zip(lows.iter())
        .map(|((name, a), (_, b))| (*name, b.exposed_s - a.exposed_s))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((TermKind::Compute, 0.0));
    if delta <= 0.0 {
        return "the same time term by term: an exact tie".to_string();
    }
    format!(
        "{} exposed {}: {}",
        signed_seconds(delta),
        name.label(),
        term_cause(name, lower)
    )
}

/// Why a mesh's measured price differs from its catalog price: the term that moved most, as
/// "TP all-reduce 2.3x slower than nominal: TP=8 over PCIe".
pub fn shift_cause(measured: &Evaluation, nominal: &Evaluation) -> String {
    let (name, m, n) = measured
        .breakdown
        .terms()
        .iter()
        .zip(nominal.breakdown.terms().iter())
        .map(|((name, m), (_, n))| (*name, m.exposed_s, n.exposed_s))
        .max_by(|a, b| (a.1 - a.2).abs().total_cmp(&(b.1 - b.2).abs()))
        .unwrap_or((TermKind::Compute, 0.0, 0.0));
    let how = if n <= 0.0 {
        format!("{} where nominal had none", seconds(m))
    } else if m >= n {
        format!("{:.1}x slower than nominal", m / n)
    } else {
        format!("{:.1}x faster than nominal", n / m.max(f64::MIN_POSITIVE))
    };
    let mut cause = term_cause(name, measured);
    let p = &measured.placement;
    let span = name.collective(&measured.mesh, p).map(|(_, span)| span);
    if span.is_some_and(|s| s.link == LinkClass::Pcie) {
        cause.push_str(" (PCIe-only node)");
    }
    format!("{} {how}: {cause}", name.label())
}

/// A signed duration with a unit that keeps three significant digits.
pub fn signed_seconds(s: f64) -> String {
    let sign = if s < 0.0 { "-" } else { "+" };
    format!("{sign}{}", seconds(s.abs()))
}

/// A duration with a unit that keeps it readable: s, ms or us.
pub fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} us", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_their_unit() {
        assert_eq!(seconds(1.94), "1.94 s");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(0.000045), "45 us");
        assert_eq!(signed_seconds(-0.5), "-500.0 ms");
    }
}
