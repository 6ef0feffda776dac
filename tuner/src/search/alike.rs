//! Layouts that price alike: a ranking of near-copies (a CP rank for a DP rank, one more
//! virtual stage) says one thing several times, so the ranking groups them and counts the
//! groups, not the layouts.

use crate::cost::{Evaluation, Scenario};

use super::{search, Constraints, SearchResult};

/// Two layouts price alike when their step times and their memory per GPU each agree within
/// this share of the faster one's.
pub const ALIKE_WITHIN: f64 = 0.005;

/// Whether `other` prices like `first`: step time and memory per GPU within [`ALIKE_WITHIN`].
pub fn prices_alike(first: &Evaluation, other: &Evaluation) -> bool {
    let close = |a: f64, b: f64| (a - b).abs() <= ALIKE_WITHIN * a.abs();
    close(first.step_time_s, other.step_time_s) && close(first.memory.total, other.memory.total)
}

/// The group of each layout of a ranking (fastest first), numbered from 0 in rank order: a
/// layout joins the first group whose first layout it prices alike, or starts the next one.
/// Comparing with the first layout only keeps a group from drifting along a chain of
/// neighbours each 0.5% slower than the last.
pub fn groups(ranked: &[Evaluation]) -> Vec<usize> {
    let mut firsts: Vec<&Evaluation> = Vec::new();
    ranked
        .iter()
        .map(|e| match firsts.iter().position(|f| prices_alike(f, e)) {
            Some(g) => g,
            None => {
                firsts.push(e);
                firsts.len() - 1
            }
        })
        .collect()
}

/// A ranking of the `distinct` fastest groups of layouts that price alike.
pub struct Distinct {
    /// The search, `ranked` cut to the layouts of the first `distinct` groups.
    pub result: SearchResult,
    /// The group of each layout of `result.ranked`.
    pub groups: Vec<usize>,
}

/// Searches until the `distinct` fastest groups are whole: every layout of the last one is in
/// the ranking once a slower layout than its first layout's price plus [`ALIKE_WITHIN`] is.
pub fn search_distinct(scenario: &Scenario, c: &Constraints, distinct: usize) -> Distinct {
    // Eight layouts per group covers the usual CP-for-DP and v-for-v+1 copies in one pass.
    let mut limit = distinct.saturating_mul(8).max(1);
    loop {
        let mut result = search(scenario, c, limit);
        let groups = groups(&result.ranked);
        let exhausted = result.ranked.len() < limit;
        let last_first = result
            .ranked
            .iter()
            .zip(&groups)
            .filter(|(_, g)| **g + 1 == distinct)
            .map(|(e, _)| e.step_time_s)
            .next();
        let whole = match (last_first, result.ranked.last()) {
            (Some(first), Some(slowest)) => slowest.step_time_s > first * (1.0 + ALIKE_WITHIN),
            _ => false,
        };
        if exhausted || whole {
            let (ranked, groups) = std::mem::take(&mut result.ranked)
                .into_iter()
                .zip(groups)
                .filter(|(_, g)| *g < distinct)
                .unzip();
            result.ranked = ranked;
            return Distinct { result, groups };
        }
        limit = limit.saturating_mul(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};
    use crate::mesh::Training;

    /// Llama 3 8B on 64 A100: a CP rank prices like a DP rank, so the plain ranking opens with
    /// four copies of one layout (DP64, DP32 CP2, DP16 CP4, DP8 CP8 at one step time).
    fn llama8b_on_64_a100() -> Scenario {
        let model = catalog::model("llama3-8b").unwrap().shape;
        let training = Training::megatron(model.seq_len, 512);
        let cluster = catalog::cluster("dgx-a100").unwrap();
        Scenario::nominal(model, training, cluster, 64, NOMINAL)
    }

    #[test]
    fn the_distinct_search_keeps_whole_groups_of_layouts_that_price_alike() {
        let scenario = llama8b_on_64_a100();
        let c = Constraints::default();
        let Distinct { result, groups } = search_distinct(&scenario, &c, 5);
        assert_eq!(groups.iter().max(), Some(&4), "{groups:?}");
        assert!(
            result.ranked.len() > 5,
            "copies make the groups: {groups:?}"
        );
        // Every layout of the whole ranking that prices like one of the five groups' first
        // layouts is in, and in that group; nothing else is.
        let all = search(&scenario, &c, result.fitting).ranked;
        let all_groups = super::groups(&all);
        let expected: Vec<_> = all
            .iter()
            .zip(&all_groups)
            .filter(|(_, g)| **g < 5)
            .map(|(e, g)| (e.mesh, *g))
            .collect();
        let got: Vec<_> = result.ranked.iter().map(|e| e.mesh).zip(groups).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_group_is_measured_from_its_first_layout() {
        let scenario = llama8b_on_64_a100();
        let ranked = search(&scenario, &Constraints::default(), 40).ranked;
        let groups = super::groups(&ranked);
        let first = |g: usize| &ranked[groups.iter().position(|x| *x == g).unwrap()];
        for (e, g) in ranked.iter().zip(&groups) {
            assert!(prices_alike(first(*g), e));
            for earlier in 0..*g {
                assert!(!prices_alike(first(earlier), e), "{} in {g}", e.mesh);
            }
        }
        // The step time 0.5% over its group's first layout is alike, 0.6% is not.
        let mut near = ranked[0].clone();
        near.step_time_s *= 1.005;
        assert!(prices_alike(&ranked[0], &near));
        near.step_time_s = ranked[0].step_time_s * 1.006;
        assert!(!prices_alike(&ranked[0], &near));
        let mut leaner = ranked[0].clone();
        leaner.memory.total *= 0.99;
        assert!(!prices_alike(&ranked[0], &leaner));
    }
}
