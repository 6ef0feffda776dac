use super::profile::{Profile, PROFILE_VERSION};
use super::*;
use crate::catalog::NOMINAL;

fn vtrain(ids: &[&str], scale: f64) -> RunsFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/vtrain-runs.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut file = validate::parse_runs(&text, "data/vtrain-runs.yaml").unwrap();
    file.runs.retain(|r| ids.contains(&r.id.as_str()));
    for r in &mut file.runs {
        r.observed.iteration_time_s *= scale;
    }
    file
}

/// Three jobs that all ran twice as slow as priced want the host time and everything else
/// at the slow end of its range; the prior holds every knob off its edge, and the calibrated
/// price moves toward them without reaching them.
#[test]
fn three_jobs_do_not_drag_a_knob_to_the_edge() {
    let file = vtrain(
        &[
            "vtrain-single-0003",
            "vtrain-single-0009",
            "vtrain-single-0011",
        ],
        2.0,
    );
    assert_eq!(file.runs.len(), 3);
    let (jobs, skipped) = jobs(std::slice::from_ref(&file), &NOMINAL, None);
    assert!(skipped.is_empty(), "{skipped:?}");
    let c = calibrate(&jobs, skipped, &NOMINAL);
    for (k, knob) in c.knobs.iter().zip(FITTED) {
        let (lo, hi) = knob.range;
        let u = (k.value - lo) / (hi - lo);
        let u0 = (k.prior - lo) / (hi - lo);
        assert!(
            (u - u0).abs() <= 0.3,
            "{} moved from {u0:.2} to {u:.2} of its range",
            k.name
        );
        assert!(k.uncertainty > 0.0 && k.uncertainty.is_finite(), "{k:?}");
    }
    for j in &c.jobs {
        assert!(j.calibrated_error > j.prior_error, "{j:?}");
        assert!(j.calibrated_error < 0.0, "{j:?}");
    }
}

#[test]
fn profiles_round_trip_and_refuse_what_they_cannot_be() {
    let file = vtrain(&["vtrain-single-0003", "vtrain-single-0009"], 1.1);
    let (jobs, skipped) = jobs(std::slice::from_ref(&file), &NOMINAL, None);
    let c = calibrate(&jobs, skipped, &NOMINAL);
    let p = Profile::new(&c, vec!["jobs.yaml".into()]);
    assert_eq!(p.measured_jobs(), 0);
    assert_eq!(
        p.jobs[0].pricing,
        crate::calibrate::Pricing::Nominal("no measurements given".into())
    );
    let text = serde_saphyr::to_string(&p).unwrap();
    let back = Profile::parse(&text, "p.yaml").unwrap();
    assert_eq!(back, p);
    assert_eq!(back.scores.jobs, 2);
    let e = back.apply(&NOMINAL);
    assert_eq!(fitted_values(&e), fitted_values(&c.efficiency));
    assert!(back
        .note("p.yaml")
        .starts_with("priced with profile p.yaml: knobs calibrated to 2 jobs of jobs.yaml"));

    let newer = text.replace(
        &format!("profile_version: {PROFILE_VERSION}"),
        "profile_version: 2",
    );
    let err = Profile::parse(&newer, "p.yaml").unwrap_err().to_string();
    assert!(
        err.contains("p.yaml: profile_version") && err.contains("written by a newer tuner"),
        "{err}"
    );
    let unknown = text.replace("name: host_s_per_kernel", "name: host_time");
    let err = Profile::parse(&unknown, "p.yaml").unwrap_err().to_string();
    assert!(
        err.contains("knobs.host_time") && err.contains("host_s_per_kernel"),
        "{err}"
    );
    let outside = text.replacen("value: ", "value: -", 1);
    let err = Profile::parse(&outside, "p.yaml").unwrap_err().to_string();
    assert!(err.contains("knobs.host_s_per_kernel.value"), "{err}");
}

/// The one-step leave-one-out that prices large calibrations agrees with refitting without
/// each job: on twelve of vTrain's runs the held-out errors differ by under half a point.
#[test]
fn one_step_leave_one_out_matches_refits() {
    let ids: Vec<String> = (3..200).map(|i| format!("vtrain-single-{i:04}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut file = vtrain(&ids, 1.0);
    file.runs.truncate(12);
    let (jobs, _) = jobs(std::slice::from_ref(&file), &NOMINAL, None);
    let all: Vec<&Job> = jobs.iter().collect();
    let u0 = to_unit(&NOMINAL);
    let f = residuals(&all);
    let fit = fit::minimize(&f, &u0, &u0);
    let held = |refits: Vec<Vec<f64>>| -> Vec<f64> {
        jobs.iter()
            .zip(refits)
            .map(|(j, u)| j.step_s(&u) / j.observed_s - 1.0)
            .collect()
    };
    let exact = held(fit::refits(&f, all.len(), &u0, &fit));
    let stepped = held(fit::steps(&f, &u0, &fit));
    for (a, b) in exact.iter().zip(&stepped) {
        assert!((a - b).abs() < 0.005, "{a} vs {b}");
    }
}
