//! Suggestions for a misspelled name: the catalog's ids, a file's keys.

/// Names close to `name` (catalog ids, file keys), closest first: a shared prefix or substring, or an edit
/// distance of at most a third of the name (ripgrep suggests flags the same way).
pub fn similar<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let name = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .filter_map(|c| {
            let d = edit_distance(&name, c);
            let close =
                c.contains(name.as_str()) || name.contains(c) || d <= name.len().max(3) / 3 + 1;
            close.then_some((d, c))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .map(|(_, c)| c.to_string())
        .take(5)
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
