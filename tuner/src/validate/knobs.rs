//! The knobs a run leaves null, decided by one written rule (`docs/choices.md`, "What a run
//! leaves null"): the ZeRO stage and recomputation that the run's framework or recipe family
//! runs unless told, where the published layout fits in memory with them; else, and for every
//! knob without such a default, the fastest choice that fits. Each choice names the rule
//! that made it.

use std::collections::BTreeMap;

use super::{Choice, Run, RunLayout};
use crate::catalog::frameworks::Unsaid;
use crate::cost::{Evaluation, Scenario};
use crate::error::{bad_input, TunerError};
use crate::mesh::Mesh;
use crate::search::{for_each_evaluation, Constraints};

/// What decided the knobs of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// The framework's or recipe family's defaults, which fit.
    Defaults,
    /// The fastest layout that fits, the defaults not fitting.
    FastestFit,
    /// Nothing fits: the fastest layout with the defaults, kept with a note.
    Unfit,
}

/// The fastest fitting layout, the fastest of all and the one needing least memory, of what
/// `c` allows.
struct Pass {
    fastest_fit: Option<Evaluation>,
    fastest: Option<Evaluation>,
    leanest_bytes: f64,
}

fn pass(scenario: &Scenario, c: &Constraints) -> Pass {
    let mut p = Pass {
        fastest_fit: None,
        fastest: None,
        leanest_bytes: f64::INFINITY,
    };
    for_each_evaluation(scenario, c, |e| {
        let faster =
            |b: &Option<Evaluation>| b.as_ref().is_none_or(|b| e.step_time_s < b.step_time_s);
        p.leanest_bytes = p.leanest_bytes.min(e.memory.total);
        if e.fits() && faster(&p.fastest_fit) {
            p.fastest_fit = Some(e.clone());
        }
        if faster(&p.fastest) {
            p.fastest = Some(e);
        }
    });
    p
}

/// `c` with the null ZeRO stage and recomputation set to the defaults of `unsaid`, where it
/// has one.
fn with_defaults(c: &Constraints, unsaid: &Unsaid) -> Constraints {
    Constraints {
        zero_stage: c.zero_stage.or(Some(unsaid.zero_stage)),
        recompute: c.recompute.or(unsaid.recompute),
        ..c.clone()
    }
}

/// The published layout as its framework runs it, by the rule above, with a note where the
/// defaults do not fit and the knobs the run left null in `choices`.
pub(super) fn published_mesh(
    run: &Run,
    scenario: &Scenario,
    c: &Constraints,
    unsaid: &Unsaid,
    notes: &mut Vec<String>,
    choices: &mut BTreeMap<Choice, String>,
) -> Result<Evaluation, TunerError> {
    let defaulted = pass(scenario, &with_defaults(c, unsaid));
    let gib = |bytes: f64| bytes / GIB;
    let (chosen, rule) = match defaulted.fastest_fit {
        Some(e) => (e, Rule::Defaults),
        None => match pass(scenario, c).fastest_fit {
            Some(e) => {
                notes.push(format!(
                    "{} defaults need {:.1} GiB per GPU by our memory model, more than the {:.0} GiB the GPU has: the fastest layout that fits decides the knobs the run leaves null",
                    unsaid.name,
                    gib(defaulted.leanest_bytes),
                    gib(e.capacity_bytes)
                ));
                (e, Rule::FastestFit)
            }
            None => {
                let Some(e) = defaulted.fastest else {
                    // The pins' own check names the knob where it can.
                    let why = c
                        .check(&scenario.model, scenario.gpus)
                        .err()
                        .map_or(String::new(), |e| format!("; as flags, {e}"));
                    return Err(bad_input(
                        &format!("runs[{}].layout", run.id),
                        "the published layout",
                        &format!("a layout the model can split (tp dividing the heads, pp x virtual stages splitting the layers, dp x microbatch dividing the batch, ep x etp dividing tp x cp x dp){why}"),
                    ));
                };
                notes.push(format!(
                    "published layout needs {:.1} GiB per GPU by our memory model, more than the {:.0} GiB the GPU has",
                    gib(e.memory.total),
                    gib(e.capacity_bytes)
                ));
                (e, Rule::Unfit)
            }
        },
    };
    note_chosen_knobs(&run.layout, c, &chosen.mesh, unsaid, rule, choices);
    Ok(chosen)
}

/// The knobs the source left out, each with the rule that chose it.
fn note_chosen_knobs(
    l: &RunLayout,
    c: &Constraints,
    mesh: &Mesh,
    unsaid: &Unsaid,
    rule: Rule,
    choices: &mut BTreeMap<Choice, String>,
) {
    let searched = match rule {
        Rule::Defaults | Rule::FastestFit => "the fastest that fits",
        Rule::Unfit => "the fastest; nothing fits",
    };
    let defaulted = |has_default: bool| match rule {
        Rule::Defaults | Rule::Unfit if has_default => format!("the default of {}", unsaid.name),
        _ if has_default => "the fastest that fits; the default does not, see notes".into(),
        _ => format!(
            "{searched}; the default of {} is no mode the model prices",
            unsaid.name
        ),
    };
    let mut choose = |knob, value: String, why: String| {
        choices.insert(knob, format!("{value} ({why})"));
    };
    if l.microbatch_size.is_none() {
        choose(
            Choice::MicrobatchSize,
            mesh.microbatch_size.to_string(),
            searched.into(),
        );
    }
    if l.virtual_stages.is_none() && l.pp > 1 {
        // The run's schedule fixes the stages per rank where it names no interleaving, and
        // torchtitan's where it names no split points (`Run::constraints`).
        let why = match c.virtual_stages {
            Some(1) => "the schedule is not interleaved",
            Some(_) => "the default of an interleaved schedule without split points",
            None => searched,
        };
        choose(
            Choice::VirtualStages,
            mesh.virtual_stages.to_string(),
            why.into(),
        );
    }
    if l.zero_stage.is_none() {
        choose(
            Choice::ZeroStage,
            mesh.zero_stage.to_string(),
            defaulted(true),
        );
    }
    if l.recompute.is_none() {
        let why = defaulted(unsaid.recompute.is_some());
        choose(Choice::Recompute, mesh.recompute.to_string(), why);
    }
    if l.sequence_parallel.is_none() {
        choose(
            Choice::SequenceParallel,
            mesh.sequence_parallel.to_string(),
            searched.into(),
        );
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::NOMINAL;
    use crate::validate::{parse_runs, predict, RunPrediction};

    /// Megatron-Bridge's 25.11 Llama 3 70B (64 GPUs) and 405B (1,024 GPUs) FP8 rows, with the
    /// ZeRO stage they publish left out and the source (and a group naming no framework) as
    /// given.
    fn bridge(id: &str, source: &str) -> RunPrediction {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/megatron-bridge-h100-fp8.yaml"
        ))
        .unwrap();
        let mut runs = parse_runs(&text, "bridge").unwrap().runs;
        let mut run = runs.remove(runs.iter().position(|r| r.id == id).unwrap());
        run.layout.zero_stage = None;
        run.source = source.into();
        run.group = "llama3-fp8".into();
        predict(&run, &NOMINAL).unwrap()
    }

    #[test]
    fn a_recipe_run_leaving_zero_and_recompute_null_runs_the_recipe_defaults() {
        let p = bridge(
            "mbridge-25.11-h100-llama3-70b-64gpu-fp8",
            "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, 25.11",
        );
        // The distributed optimizer (ZeRO 1) and no recomputation fit 80 GB at TP4 PP8.
        let recipes = "(the default of NeMo and Megatron-Bridge recipes)";
        assert_eq!(p.choices[&Choice::ZeroStage], format!("1 {recipes}"));
        assert_eq!(p.choices[&Choice::Recompute], format!("none {recipes}"));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn defaults_that_do_not_fit_leave_the_knobs_to_the_fastest_layout_that_fits() {
        // Plain Megatron-LM keeps the whole optimizer on every data-parallel rank: 405B over
        // TP8 x PP8 x CP2 holds 6.3B parameters a GPU, 16 bytes each under Adam, past 80 GB.
        let p = bridge(
            "mbridge-25.11-h100-llama3-405b-1024gpu-fp8",
            "a Megatron-LM benchmark, 2025",
        );
        assert!(
            p.choices[&Choice::ZeroStage]
                .ends_with("(the fastest that fits; the default does not, see notes)"),
            "{:?} {:?}",
            p.choices,
            p.notes
        );
        assert_ne!(p.choices[&Choice::ZeroStage].as_bytes()[0], b'0');
        assert!(
            p.notes[0].starts_with("Megatron-LM defaults need "),
            "{:?}",
            p.notes
        );
        assert!(p.notes[0]
            .ends_with("the fastest layout that fits decides the knobs the run leaves null"));
        // Under the recipes' distributed optimizer the same layout fits without recomputation.
        let p = bridge(
            "mbridge-25.11-h100-llama3-405b-1024gpu-fp8",
            "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, 25.11",
        );
        assert_eq!(
            p.choices[&Choice::ZeroStage],
            "1 (the default of NeMo and Megatron-Bridge recipes)"
        );
    }
}
