//! The commands that price layouts and score runs: recommend, explain, compare, validate,
//! fit and snapshot, each returning what it prints.

use std::path::PathBuf;

use anyhow::{bail, Context};

use tuner::catalog::{self, NOMINAL, PRIOR};
use tuner::cost::{Evaluation, Scenario};
use tuner::ingest::prometheus::fleet::FleetQuery;
use tuner::measure::Priced;
use tuner::mesh::Precision;
use tuner::mesh_spec::SpecError;
use tuner::report::doc::{Document, MeasurementsDoc, MeshDoc};
use tuner::report::{explain, launch, table};
use tuner::search::{self, Constraints};
use tuner::validate;

use crate::exit::{bad_flag, from_flags};
use crate::job_args::{efficiency, Emit, JobArgs};
use crate::measure_args::{self, MeasureArgs};
use crate::render::{render, Format, Output};

/// How validate scores: the flags that choose its efficiencies and its output.
pub(crate) struct ValidateMode {
    pub(crate) summary_only: bool,
    pub(crate) fit: bool,
    pub(crate) leave_one_source_out: bool,
    pub(crate) profile: Option<PathBuf>,
}

pub(crate) fn validate_command(
    paths: &[PathBuf],
    mode: ValidateMode,
    measurements: &[PathBuf],
    measurements_gpu: Option<&str>,
    format: Format,
) -> anyhow::Result<Output> {
    let ValidateMode {
        summary_only,
        fit,
        leave_one_source_out,
        profile,
    } = mode;
    let (calibrated, profiled) = efficiency(profile.as_deref())?;
    let files = validate::read_runs(paths)?;
    if leave_one_source_out {
        let rows = validate::fitting::leave_one_source_out(&files, &PRIOR);
        #[derive(serde::Serialize)]
        struct HeldOutDoc<'a> {
            held_out: &'a [validate::fitting::HeldOut],
        }
        return render(format, &HeldOutDoc { held_out: &rows }, || {
            table::held_out(&rows)
        })
        .map(Output::from);
    }
    let efficiency = if fit {
        // The global fit may also continue from the catalog's own values: no run is held out
        // of it, so where it starts leaks nothing.
        let mut starts = validate::fitting::starts(&PRIOR);
        starts.push(NOMINAL);
        validate::fitting::fit(&files, &starts, None)
    } else {
        calibrated
    };
    let assumed = measure_args::measurements_gpu_id(measurements_gpu)?;
    let mut serving = validate::measured::Serving::load(&files, measurements, assumed)?;
    let v = if serving.any() {
        validate::validate_measured(&files, &efficiency, &mut serving)
    } else {
        validate::validate(&files, &efficiency)
    };
    let mut notes: Vec<String> = profiled.into_iter().collect();
    notes.extend(v.measured.iter().flat_map(|m| m.notes.iter().cloned()));
    let data = render(format, &v, || table::validation(&v, summary_only))?;
    Ok(Output {
        data,
        notes,
        ..Output::default()
    })
}

/// The launch config of `e`, or a runtime failure where the framework cannot run it.
pub(crate) fn emit(kind: Emit, scenario: &Scenario, e: &Evaluation) -> anyhow::Result<String> {
    let (m, t) = (&e.mesh, &scenario.training);
    Ok(match kind {
        Emit::Megatron => launch::megatron(&scenario.model, t, m)?,
        Emit::Deepspeed => launch::deepspeed(t, m),
        Emit::Torchtitan => launch::torchtitan(&scenario.model, t, m)?,
        Emit::TorchtitanV02 => launch::torchtitan_v02(&scenario.model, t, m)?,
    })
}

/// The job's scenario, priced from measurements where given, with its notes.
pub(crate) fn priced(
    job: &JobArgs,
    measure_args: &MeasureArgs,
    emit: Option<Emit>,
) -> anyhow::Result<(Priced, Vec<String>)> {
    let (nominal, mut notes) = job.scenario(emit)?;
    let priced = measure_args::price(nominal, measure_args)?;
    notes.extend(priced.notes.iter().cloned());
    notes.push(match priced.fits {
        Some(_) => {
            "figures: measured where each mesh's sources say so, catalog (nominal) elsewhere".into()
        }
        None => {
            "figures: catalog (nominal) datasheet numbers and efficiencies, not measurements".into()
        }
    });
    Ok((priced, notes))
}

/// The pins within what the priced framework runs, each limit said once in `notes`.
fn runnable(
    priced: &Priced,
    c: &Constraints,
    notes: &mut Vec<String>,
) -> anyhow::Result<Constraints> {
    let (c, said) = c
        .within(priced.scenario.training.framework)
        .map_err(from_flags)?;
    for note in said {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    Ok(c)
}

pub(crate) fn document(
    priced: &Priced,
    notes: Vec<String>,
    evaluated: usize,
    fitting: usize,
    meshes: Vec<MeshDoc>,
) -> Document {
    let mut doc = Document::new(&priced.scenario, notes, evaluated, fitting, meshes);
    doc.measurements = MeasurementsDoc::of(priced);
    if priced.fits.is_some() {
        doc.cluster.figures = "measured".into();
    }
    doc
}

pub(crate) fn recommend(
    job: &JobArgs,
    c: &Constraints,
    measure_args: &MeasureArgs,
    compare_nominal: bool,
    top: usize,
    emit_as: Option<Emit>,
) -> anyhow::Result<Output> {
    let (mut priced, mut notes) = priced(job, measure_args, emit_as)?;
    let c = &runnable(&priced, c, &mut notes)?;
    let search::Distinct { result, groups } =
        search::search_distinct(&priced.scenario, c, top.max(1));
    if result.ranked.is_empty() {
        bail!(no_mesh(&mut priced.scenario, result.leanest.as_ref(), c));
    }
    if let Some(kind) = emit_as {
        return Ok(Output {
            data: emit(kind, &priced.scenario, &result.ranked[0])?,
            notes,
            ..Output::default()
        });
    }
    let scenario = &priced.scenario;
    let against = ranked_against(&groups);
    let mut meshes: Vec<MeshDoc> = result
        .ranked
        .iter()
        .zip(&against)
        .enumerate()
        .map(|(i, (e, above))| {
            let why = above.map(|(a, _)| explain::why_below(&result.ranked[a], e));
            MeshDoc::new(i + 1, e, scenario, why)
        })
        .collect();
    for (i, above) in against.iter().enumerate() {
        if let Some((a, alike)) = *above {
            meshes[i].tie_with_above = meshes[i].step_time_low_s <= meshes[a].step_time_high_s;
            meshes[i].equivalent_to = alike.then_some(a + 1);
        }
    }
    let top_pick_changed = if compare_nominal {
        against_nominal(scenario, c, &result.ranked, &mut meshes)
    } else {
        None
    };
    let mut doc = document(&priced, notes, result.evaluated, result.fitting, meshes);
    doc.top_pick_changed = top_pick_changed;
    let data = render(job.format, &doc, || table::recommend(&doc))?;
    let warnings = doc.distinct_warnings().into_iter();
    let warnings = match job.format {
        // The table's rows name each warning by its marker.
        Format::Table => warnings
            .enumerate()
            .map(|(i, w)| format!("{}: {w}", table::warning_marker(i)))
            .collect(),
        Format::Json | Format::Yaml => warnings.map(str::to_string).collect(),
    };
    Ok(Output {
        warnings,
        ..with_notes(data, &doc)?
    })
}

/// What each layout of a grouped ranking is ranked against, by index, and whether it prices
/// alike that layout: the first of a group against the first of the group before, any other
/// against its own group's first; `None` for the first layout.
fn ranked_against(groups: &[usize]) -> Vec<Option<(usize, bool)>> {
    let first = |g: usize| groups.iter().position(|x| *x == g);
    groups
        .iter()
        .enumerate()
        .map(|(i, &g)| match first(g) {
            Some(f) if f < i => Some((f, true)),
            _ => g.checked_sub(1).and_then(first).map(|f| (f, false)),
        })
        .collect()
}

/// The rendered document, with its notes and its distinct warnings for stderr.
pub(crate) fn with_notes(data: String, doc: &Document) -> anyhow::Result<Output> {
    Ok(Output {
        data,
        notes: doc.notes.clone(),
        warnings: doc
            .distinct_warnings()
            .into_iter()
            .map(str::to_string)
            .collect(),
    })
}

/// Ranks the same meshes with catalog figures: each mesh's nominal rank and, where it moved,
/// the term that moved it; returns a line when the top pick itself changed.
pub(crate) fn against_nominal(
    scenario: &Scenario,
    c: &Constraints,
    ranked: &[Evaluation],
    meshes: &mut [MeshDoc],
) -> Option<String> {
    let nominal = Scenario::nominal(
        scenario.model.clone(),
        scenario.training.clone(),
        scenario.cluster.clone(),
        scenario.gpus,
        scenario.efficiency.clone(),
    );
    let mut steps: Vec<f64> = Vec::new();
    search::for_each_evaluation(&nominal, c, |e| {
        if e.fits() {
            steps.push(e.step_time_s);
        }
    });
    steps.sort_by(f64::total_cmp);
    for (doc, e) in meshes.iter_mut().zip(ranked) {
        let n = nominal.evaluate(&e.mesh);
        if n.fits() {
            doc.nominal_rank = Some(steps.partition_point(|s| *s < n.step_time_s) + 1);
        }
        if doc.nominal_rank != Some(doc.rank) {
            doc.shift_cause = Some(explain::shift_cause(e, &n));
        }
    }
    let nb = search::search(&nominal, c, 1).ranked.into_iter().next()?;
    if nb.mesh == ranked[0].mesh {
        return None;
    }
    let measured_nb = scenario.evaluate(&nb.mesh);
    Some(format!(
        "top pick changed: the catalog picks {} ({:.3} s), the measurements pick {} ({:.3} s); on this cluster the catalog pick takes {:.3} s: {}",
        nb.mesh,
        nb.step_time_s,
        ranked[0].mesh,
        ranked[0].step_time_s,
        measured_nb.step_time_s,
        explain::shift_cause(&measured_nb, &nb)
    ))
}

/// Why nothing was ranked: no valid mesh at all, or none that fits memory (`leanest` is the
/// mesh that came closest).
pub(crate) fn no_mesh(
    scenario: &mut Scenario,
    leanest: Option<&Evaluation>,
    c: &Constraints,
) -> anyhow::Error {
    let name = scenario.model.name.clone();
    let gpus = scenario.gpus;
    let reason = match leanest {
        Some(lean) => format!(
            "the leanest layout ({}) needs {:.1} GiB per GPU, has {:.0} GiB",
            lean.mesh,
            lean.memory.total / GIB,
            lean.capacity_bytes / GIB
        ),
        None if Constraints::default()
            .within(scenario.training.framework)
            .is_ok_and(|(searched, _)| *c != searched) => "no layout satisfies the pinned knobs (tp must divide heads and KV heads, pp the layers, dp x microbatch the global batch)".to_string(),
        None => "no layout divides the model and the global batch".to_string(),
    };
    // A pin that can never hold, or not at this count, is the answer; no larger count helps.
    if let Err(e) = c
        .check_knobs(&scenario.model)
        .and_then(|()| c.check_sequence(scenario.training.seq_len))
    {
        return from_flags(e);
    }
    if let Err(e) = c.check_count(gpus) {
        return from_flags(with_nearest_counts(e, scenario, c));
    }
    let hint = match search::smallest_working_count(scenario, gpus, c) {
        Some(n) => format!("; the smallest GPU count that works is {n}"),
        None => String::new(),
    };
    tuner::TunerError::NoMesh {
        model: name,
        gpus,
        reason: reason + &hint,
    }
    .into()
}

/// A GPU count the pinned sizes do not divide, with the nearest counts where the pins leave
/// a layout, when there are any.
pub(crate) fn with_nearest_counts(
    mut err: tuner::TunerError,
    scenario: &Scenario,
    c: &Constraints,
) -> tuner::TunerError {
    if let tuner::TunerError::BadInput { allowed, .. } = &mut err {
        let t = &scenario.training;
        let near = search::nearest_valid_counts(
            &scenario.model,
            t.seq_len,
            t.global_batch,
            scenario.gpus,
            c,
        );
        let near = match near {
            (Some(below), Some(above)) => format!("{below} or {above}"),
            (Some(n), None) | (None, Some(n)) => n.to_string(),
            (None, None) => return err,
        };
        allowed.push_str(&format!(
            "; the nearest GPU counts with a layout for the pinned knobs: --gpus {near}"
        ));
    }
    err
}

pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

pub(crate) fn explain_one(
    job: &JobArgs,
    c: &Constraints,
    measure_args: &MeasureArgs,
    emit_as: Option<Emit>,
) -> anyhow::Result<Output> {
    let (mut priced, mut notes) = priced(job, measure_args, emit_as)?;
    let c = &runnable(&priced, c, &mut notes)?;
    let (best, count) = search::best_mesh(&priced.scenario, c);
    let Some(e) = best else {
        bail!(no_mesh(&mut priced.scenario, None, c));
    };
    if count > 1 {
        notes.push(format!("knobs not given were chosen as the fastest that fits (or the leanest) of {count} layouts: {}", e.mesh));
    }
    if !e.fits() {
        notes.push(format!(
            "impossible: needs {:.1} GiB per GPU, has {:.0} GiB",
            e.memory.total / GIB,
            e.capacity_bytes / GIB
        ));
    }
    if let Some(kind) = emit_as {
        return Ok(Output {
            data: emit(kind, &priced.scenario, &e)?,
            notes,
            ..Output::default()
        });
    }
    let meshes = vec![MeshDoc::new(1, &e, &priced.scenario, None)];
    let doc = document(&priced, notes, 1, usize::from(e.fits()), meshes);
    with_notes(render(job.format, &doc, || table::explain(&doc))?, &doc)
}

/// Pinned knobs from a `--a`/`--b` spec, an error named by flag and key.
pub(crate) fn parse_mesh(spec: &str, flag: &str) -> anyhow::Result<Constraints> {
    spec.parse().map_err(|e: SpecError| {
        let at = e
            .key
            .map_or(flag.to_string(), |key| format!("{flag} {key}"));
        bad_flag(&at, e.value, e.allowed).into()
    })
}

pub(crate) fn compare(
    job: &JobArgs,
    measure_args: &MeasureArgs,
    a: &str,
    b: &str,
) -> anyhow::Result<Output> {
    let (mut priced, mut notes) = priced(job, measure_args, None)?;
    let mut picked = Vec::new();
    for (flag, spec) in [("--a", a), ("--b", b)] {
        let c = runnable(&priced, &parse_mesh(spec, flag)?, &mut notes)
            .with_context(|| format!("{flag} {spec}"))?;
        match search::best_mesh(&priced.scenario, &c).0 {
            Some(e) => picked.push(e),
            None => {
                return Err(
                    no_mesh(&mut priced.scenario, None, &c).context(format!("{flag} {spec}"))
                )
            }
        }
    }
    let meshes: Vec<MeshDoc> = picked
        .iter()
        .enumerate()
        .map(|(i, e)| MeshDoc::new(i + 1, e, &priced.scenario, None))
        .collect();
    let doc = document(
        &priced,
        notes,
        2,
        picked.iter().filter(|e| e.fits()).count(),
        meshes,
    );
    let data = render(job.format, &doc, || table::compare(&doc))?;
    // Each warning once, said of the layouts it is about.
    let (a, b) = (&doc.meshes[0].warnings, &doc.meshes[1].warnings);
    let warnings = doc
        .distinct_warnings()
        .into_iter()
        .map(
            |w| match (a.iter().any(|x| x == w), b.iter().any(|x| x == w)) {
                (true, true) => format!("A and B: {w}"),
                (true, false) => format!("A: {w}"),
                _ => format!("B: {w}"),
            },
        )
        .collect();
    Ok(Output {
        warnings,
        ..with_notes(data, &doc)?
    })
}

pub(crate) fn fit_command(
    measure_args: &MeasureArgs,
    cluster: &str,
    plot: Option<&std::path::Path>,
    format: Format,
) -> anyhow::Result<Output> {
    if !measure_args.any() {
        bail!(bad_flag(
            "--measurements/--prometheus",
            "none",
            "at least one source of measurements"
        ));
    }
    let cluster = catalog::cluster(cluster).map_err(from_flags)?;
    let (m, _) = measure_args.load()?;
    let fits = tuner::fit::fit_all(
        &m.records,
        cluster.gpu.bf16_flops,
        &measure_args.fit_options(Precision::Bf16),
    );
    let report = tuner::report::fit::FitReport::new(&fits, &cluster, &m);
    match plot {
        Some(path)
            if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("png")) =>
        {
            tuner::report::plot::png(&fits, &m.records, &cluster, path)?;
        }
        Some(path) => {
            let svg = tuner::report::plot::svg(&fits, &m.records, &cluster);
            tuner::output::write_atomically(path, svg.as_bytes())?;
        }
        None => {}
    }
    Ok(Output {
        data: render(format, &report, || tuner::report::fit::table(&report))?,
        notes: report.notes.clone(),
        ..Output::default()
    })
}

pub(crate) fn snapshot_command(
    measure_args: &MeasureArgs,
    output: &std::path::Path,
    compact: bool,
) -> anyhow::Result<Output> {
    if measure_args.prometheus.is_none() {
        bail!(bad_flag(
            "--prometheus",
            "none",
            "the URL of the Prometheus that scrapes the agents"
        ));
    }
    // Every node's records unless asked otherwise: a snapshot is what support reads.
    let mode = match (compact, measure_args.fleet_query) {
        (true, FleetQuery::Recorded) => FleetQuery::Recorded,
        (true, _) => FleetQuery::Reduced,
        (false, FleetQuery::Auto) => FleetQuery::Raw,
        (false, mode) => mode,
    };
    let (m, snapshot) = measure_args.load_as(mode)?;
    let snapshot = snapshot.context("no snapshot came back from Prometheus")?;
    let json = serde_json::to_string_pretty(&snapshot)?;
    tuner::output::write_atomically(output, (json + "\n").as_bytes())?;
    Ok(Output {
        data: format!(
            "wrote {} ({} nodes, {} records)\n",
            output.display(),
            snapshot.nodes.len(),
            m.records.len()
        ),
        notes: m.notes,
        ..Output::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_spec_errors_name_the_flag_and_key() {
        let err = parse_mesh("tp=8,zero=5", "--b").unwrap_err().to_string();
        assert!(err.contains("--b zero") && err.contains('5'), "{err}");
        let err = parse_mesh("tp=8,q=5", "--a").unwrap_err().to_string();
        assert!(err.contains("--a") && err.contains("keys tp"), "{err}");
    }
}
