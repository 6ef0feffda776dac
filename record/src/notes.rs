//! Notes for people about what a reader skipped, assumed or resolved. A runaway input must not
//! print a line for every line it read (issue 31, item 13: a 234 MB log printed two million),
//! so repeated notes of one kind are counted past the first few.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;

/// How many notes of one kind are spelled out; the rest are counted.
const SHOWN_OF_A_KIND: usize = 5;

/// `notes` as lines in their order, with the first five of each kind (as `kind` tells them
/// apart) spelled out, and the last of those followed by `... and N more like it` where
/// there are more.
pub fn summarize<T: Display, K: Eq + Hash>(notes: &[T], kind: impl Fn(&T) -> K) -> Vec<String> {
    let mut total: HashMap<K, usize> = HashMap::new();
    for n in notes {
        *total.entry(kind(n)).or_default() += 1;
    }
    let mut shown: HashMap<K, usize> = HashMap::new();
    let mut lines = Vec::new();
    for n in notes {
        let k = kind(n);
        let all = total[&k];
        let seen = shown.entry(k).or_default();
        *seen += 1;
        if *seen <= SHOWN_OF_A_KIND {
            lines.push(n.to_string());
        }
        if *seen == SHOWN_OF_A_KIND && all > SHOWN_OF_A_KIND {
            lines.push(format!("... and {} more like it", all - SHOWN_OF_A_KIND));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_five_of_a_kind_are_shown_and_the_rest_counted() {
        let notes: Vec<String> = (1..=8)
            .map(|i| format!("line {i}: odd"))
            .chain(["other: once".to_string()])
            .collect();
        let lines = summarize(&notes, |n| n.starts_with("line"));
        assert_eq!(
            lines,
            [
                "line 1: odd",
                "line 2: odd",
                "line 3: odd",
                "line 4: odd",
                "line 5: odd",
                "... and 3 more like it",
                "other: once"
            ]
        );
        let five = &notes[..5];
        assert_eq!(
            summarize(five, |_| ()).len(),
            5,
            "no count when none is left out"
        );
    }
}
