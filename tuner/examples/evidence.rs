//! The figures the README and `docs/measured.md` give for measured pricing and calibration,
//! from data/ alone:
//!
//! 1. vTrain's runs priced nominal and from vTrain's own all-reduce lookup tables, by TP degree;
//! 2. calibration's honesty: profiles from 3, 10, 30 and all 360 of vTrain's 12-layer runs
//!    predicting its 20-layer runs, against the catalog they start from, with two priors: the
//!    catalog as it ships (whose knobs were fitted to all of vTrain's runs, the 20-layer ones
//!    among them) and the catalog refitted without vTrain (which has seen none of them).
//!
//! `cargo run --release -p tuner --example evidence` (about a minute on one core).

use std::collections::BTreeMap;

use tuner::calibrate;
use tuner::catalog::{Efficiency, NOMINAL, PRIOR};
use tuner::validate::{self, fitting, measured::Serving, median, RunsFile};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data");

fn read(name: &str) -> RunsFile {
    let text = std::fs::read_to_string(format!("{DATA}/{name}")).unwrap();
    validate::parse_runs(&text, &format!("data/{name}")).unwrap()
}

fn with_layers(file: &RunsFile, layers: u32) -> RunsFile {
    let text = std::fs::read_to_string(format!("{DATA}/vtrain-runs.yaml")).unwrap();
    let mut f = validate::parse_runs(&text, &file.origin).unwrap();
    f.runs.retain(|r| r.model.layers == layers);
    f
}

/// Every `len / n`-th run: a spread over the file's groups and layouts.
fn every(file: &RunsFile, n: usize) -> RunsFile {
    let text = std::fs::read_to_string(format!("{DATA}/vtrain-runs.yaml")).unwrap();
    let mut f = validate::parse_runs(&text, &file.origin).unwrap();
    let ids: Vec<String> = file.runs.iter().map(|r| r.id.clone()).collect();
    let step = (ids.len() / n).max(1);
    let keep: Vec<&String> = ids.iter().step_by(step).take(n).collect();
    f.runs.retain(|r| keep.contains(&&r.id));
    f
}

fn median_error(files: &[RunsFile], e: &Efficiency) -> (f64, f64) {
    let v = validate::validate(files, e);
    (v.summary.median_abs_error, v.summary.mean_signed_error)
}

fn main() {
    let vtrain = read("vtrain-runs.yaml");
    let tp: BTreeMap<String, u32> = vtrain
        .runs
        .iter()
        .map(|r| (r.id.clone(), r.layout.tp))
        .collect();
    let luts = std::path::PathBuf::from(format!("{DATA}/vtrain-luts/a100"));
    let files = [vtrain];
    let mut serving = Serving::load(&files, &[luts], Some("a100-sxm-80gb")).unwrap();
    let v = validate::validate_measured(&files, &NOMINAL, &mut serving);
    println!("| TP | runs | nominal median abs, mean | measured median abs, mean |");
    println!("| --- | --- | --- | --- |");
    for degree in [1, 2, 4, 8] {
        let rows: Vec<_> = v.runs.iter().filter(|r| tp[&r.id] == degree).collect();
        let nominal: Vec<f64> = rows.iter().map(|r| r.error).collect();
        let measured: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.measured.as_ref())
            .map(|m| m.error)
            .collect();
        let show = |e: &[f64]| {
            format!(
                "{:.1}%, {:+.1}%",
                100.0 * median(e.iter().map(|x| x.abs()).collect()),
                100.0 * e.iter().sum::<f64>() / e.len() as f64
            )
        };
        println!(
            "| {degree} | {} | {} | {} |",
            rows.len(),
            show(&nominal),
            show(&measured)
        );
    }
    let s = v.measured.as_ref().unwrap();
    println!(
        "| all | {} | {:.1}%, {:+.1}% | {:.1}%, {:+.1}% |\n",
        s.runs,
        100.0 * s.nominal.median_abs_error,
        100.0 * s.nominal.mean_signed_error,
        100.0 * s.measured.median_abs_error,
        100.0 * s.measured.mean_signed_error
    );

    let [vtrain] = files;
    let (l12, l20) = (with_layers(&vtrain, 12), with_layers(&vtrain, 20));
    let dev = [
        read("published-runs.yaml"),
        read("more-runs.yaml"),
        read("vtrain-runs.yaml"),
    ];
    let blind = fitting::fit(&dev, &fitting::starts(&PRIOR), Some("vtrain"));
    let targets = std::slice::from_ref(&l20);
    println!("| prior | pricing | jobs (12-layer) | 20-layer runs, prior | 20-layer runs, profile | the jobs at the prior | each job held out of its profile |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let luts = std::path::PathBuf::from(format!("{DATA}/vtrain-luts/a100"));
    for (name, prior, measured) in [
        ("catalog", &NOMINAL, false),
        ("catalog refitted without vTrain", &blind, false),
        ("catalog refitted without vTrain", &blind, true),
    ] {
        let score = |e: &Efficiency| {
            if !measured {
                return median_error(targets, e);
            }
            let mut s =
                Serving::load(targets, std::slice::from_ref(&luts), Some("a100-sxm-80gb")).unwrap();
            let m = validate::validate_measured(targets, e, &mut s)
                .measured
                .unwrap();
            (m.measured.median_abs_error, m.measured.mean_signed_error)
        };
        let before = score(prior);
        for n in [3, 10, 30, 360] {
            let jobs_file = [every(&l12, n)];
            let mut s = Serving::load(
                &jobs_file,
                std::slice::from_ref(&luts),
                Some("a100-sxm-80gb"),
            )
            .unwrap();
            let (jobs, skipped) = calibrate::jobs(&jobs_file, prior, measured.then_some(&mut s));
            let c = calibrate::calibrate(&jobs, skipped, prior);
            let after = score(&c.efficiency);
            let (p, _, held) = c.medians();
            let pricing = if measured {
                "measured (LUTs)"
            } else {
                "nominal"
            };
            println!(
                "| {name} | {pricing} | {n} | {:.1}% ({:+.1}%) | {:.1}% ({:+.1}%) | {:.1}% | {:.1}% |",
                100.0 * before.0,
                100.0 * before.1,
                100.0 * after.0,
                100.0 * after.1,
                100.0 * p,
                100.0 * held
            );
        }
    }
}
