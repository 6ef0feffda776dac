//! nccl-tests logs as they really are (issue 30): the `error` column of the layout before 2.13
//! is a deviation judged by nccl-tests' own tolerance and footer, and an all-to-all's `count`
//! column fixes its rank count. The inputs are in record/tests/data (see its README).

use record::nccl_tests::{parse, parse_with, ImportOptions, Warning};
use record::{Kind, Scope};

const OLD_ALL_REDUCE: &str = include_str!("data/old-format-64-ranks-all-reduce.txt");
const ALLTOALL: &str = include_str!("data/alltoall-64-ranks-small-sizes.txt");

/// Line of the first result row of the old all-reduce table.
const FIRST_ROW: usize = 73;

#[test]
fn r30_an_old_64_rank_all_reduce_with_small_deviations_imports_every_row() {
    // Before issue 30 the redop column made these rows read as the new layout: `148.3` was
    // refused as a root, and `2e-06` would have counted as wrong elements.
    let parsed = parse(OLD_ALL_REDUCE).unwrap();
    assert_eq!(parsed.warnings, vec![]);
    assert_eq!(parsed.records.len(), 16);
    for r in &parsed.records {
        assert_eq!(
            (r.kind, r.group.ranks, r.group.scope),
            (Kind::AllReduce, 64, Scope::InterNode)
        );
        r.validate().unwrap();
    }
    assert_eq!(parsed.records[0].bytes, 8 << 20);
    assert!((parsed.records[0].timing.time_s - 148.3e-6).abs() < 1e-12);
}

#[test]
fn r30_the_footer_has_the_last_word_on_deviations() {
    // With 8 ranks taken (a wrong --ranks), 1e-04 is past 7 x 1e-5; nccl-tests, which ran 64,
    // printed `0 OK`, so every row stays.
    let eight = ImportOptions {
        ranks: Some(8),
        ..ImportOptions::default()
    };
    assert_eq!(
        parse_with(OLD_ALL_REDUCE, &eight).unwrap().records.len(),
        16
    );

    // Without the footer (a log cut after its table) the tolerance decides: 1e+00 on the
    // first row's in-place result is wrong, 1e-04 on 64 ranks is not.
    let cut = OLD_ALL_REDUCE
        .replacen("5e-06\n", "1e+00\n", 1)
        .split("# Out of bounds")
        .next()
        .unwrap()
        .to_string();
    let parsed = parse(&cut).unwrap();
    assert_eq!(parsed.records.len(), 15);
    assert_eq!(
        parsed.warnings,
        vec![Warning::Failed {
            table: FIRST_ROW,
            lines: vec![FIRST_ROW]
        }]
    );
    assert!(!parsed.records[0].in_place && parsed.records[1].bytes == 16 << 20);

    // A FAILED footer drops the rows past the tolerance, and only those.
    let failed = OLD_ALL_REDUCE
        .replacen("5e-06\n", "1e+00\n", 1)
        .replace("values : 0 OK", "values : 1 FAILED");
    let parsed = parse(&failed).unwrap();
    assert_eq!(parsed.records.len(), 15);
    assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
}

#[test]
fn r30_an_alltoall_count_column_gives_its_ranks_past_a_cut_device_list() {
    let parsed = parse(ALLTOALL).unwrap();
    // 17 sizes from 256 B to 16 MiB; the two that move nothing are not records.
    assert_eq!(parsed.records.len(), 2 * (17 - 2));
    for r in &parsed.records {
        assert_eq!(
            (r.kind, r.group.ranks, r.group.scope),
            (Kind::AllToAll, 64, Scope::InterNode)
        );
        r.validate().unwrap();
    }
    assert_eq!(parsed.records[0].bytes, 1024);
    // The nine listed devices are a cut list, which the count column outranks.
    assert!(
        parsed
            .warnings
            .iter()
            .all(|w| matches!(w, Warning::RanksDisagree { ranks: 64, .. })),
        "{:?}",
        parsed.warnings
    );
}
