//! The seeds of tuner/fuzz are inputs the readers take (or, for the refused Prometheus replies,
//! refuse for the stated reason), so fuzzing starts from what the readers really see and a
//! change to a reader that breaks a seed shows here, on stable, rather than in a fuzz run.

use std::path::PathBuf;

use tuner::ingest::{files, prometheus, Measurements};

fn seed(target: &str, name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "fuzz", "seeds", target, name]
        .iter()
        .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn model_seeds_are_valid_models() {
    for name in ["gpt-1.7b.yaml", "llama-8b.yaml", "moe.yaml"] {
        let shape = tuner::catalog::model_from_yaml(&seed("model_yaml", name), name).unwrap();
        assert!(shape.params().total() > 1e9, "{name}");
    }
}

#[test]
fn the_snapshot_seed_is_a_snapshot_of_three_records() {
    let text = seed("measurement_files", "snapshot.json");
    assert_eq!(files::kind_of(&text), files::FileKind::Snapshot);
    let mut m = Measurements::default();
    files::read(&text, "snapshot.json", &mut m).unwrap();
    assert_eq!(m.records.len(), 3);
}

#[test]
fn prometheus_seeds_read_or_are_refused_as_stated() {
    let read = |name| prometheus::read_reply(seed("prometheus_reply", name).as_bytes());
    assert_eq!(read("vector.json"), Ok(2));
    assert_eq!(read("nan-value.json"), Ok(1));
    assert_eq!(read("empty-vector.json"), Ok(0));
    // Issue 31's hostile server: one series from two instances, and one whose labels and
    // value no hardware gives (the records refuse it, the reply reader does not).
    assert_eq!(read("two-instances.json"), Ok(3));
    assert!(read("matrix.json")
        .unwrap_err()
        .contains("result type `matrix`"));
    assert!(read("error.json").unwrap_err().contains("parse error"));
    // Found by the fuzzer: a failed reply whose error is empty was refused with an empty
    // message.
    assert_eq!(
        read("empty-error.json").unwrap_err(),
        "HTTP 200 OK, status err~od ent"
    );
    assert!(read("login.html")
        .unwrap_err()
        .contains("not JSON but HTML"));
}
