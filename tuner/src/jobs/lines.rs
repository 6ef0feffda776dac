//! Log lines as the readers see them: split on newlines and on the carriage returns that
//! progress bars redraw with, stripped of ANSI colour codes, and tagged with the rank a
//! launcher's prefix names. Markers are searched anywhere in a line, never at its start, so a
//! prefix the readers do not know (`worker-0: `, `[titan] ... INFO - `) costs nothing.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// One line of a log.
#[derive(Debug, Clone)]
pub struct Line<'a> {
    /// 1-based line number in the file; the pieces a carriage return splits share it, so a
    /// message points where an editor shows the text.
    pub number: usize,
    /// The text without ANSI escape sequences.
    pub text: Cow<'a, str>,
    /// The rank a launcher's prefix names (`[rank3]:`, `[default3]:`, `3: `, `[1,3]<stdout>:`).
    pub rank: Option<u32>,
}

/// The lines of `text`: split on `\n` and `\r`, colour codes removed, ranks read.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.split('\n').enumerate().flat_map(|(i, raw)| {
        raw.split('\r').map(move |piece| {
            let text = strip_ansi(piece);
            let rank = rank_prefix(&text);
            Line {
                number: i + 1,
                text,
                rank,
            }
        })
    })
}

/// `s` without ANSI escape sequences: CSI (`ESC [ ... final`, colours among them), OSC
/// (`ESC ] ... BEL` or `ESC \`) and two-byte escapes. A sequence cut off by the end of the
/// text is dropped with it.
pub fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// The rank a launcher's prefix names at the start of `text`, after at most one host prefix
/// (`node7: `, as pdsh writes it): torchrun's `[rank3]:` and `[default3]:`, srun `--label`'s
/// `3: `, and Open MPI `--tag-output`'s `[1,3]<stdout>:` (job, then rank).
pub fn rank_prefix(text: &str) -> Option<u32> {
    let t = text.trim_start();
    rank_at_start(t).or_else(|| {
        let (host, rest) = t.split_once(": ")?;
        if host.is_empty() || host.contains(char::is_whitespace) {
            return None;
        }
        rank_at_start(rest.trim_start())
    })
}

fn rank_at_start(t: &str) -> Option<u32> {
    for open in ["[rank", "[default"] {
        if let Some(rest) = t.strip_prefix(open) {
            let (digits, rest) = leading_digits(rest);
            return rest
                .starts_with("]:")
                .then(|| digits.parse().ok())
                .flatten();
        }
    }
    if let Some(rest) = t.strip_prefix('[') {
        let (_job, rest) = leading_digits(rest);
        let rest = rest.strip_prefix(',')?;
        let (rank, rest) = leading_digits(rest);
        return rest
            .starts_with("]<std")
            .then(|| rank.parse().ok())
            .flatten();
    }
    let (digits, rest) = leading_digits(t);
    if !digits.is_empty() && rest.starts_with(": ") {
        return digits.parse().ok();
    }
    None
}

fn leading_digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

/// The number that starts `s` after spaces: digits with an optional sign, point, exponent and
/// thousands commas (`6,123`, as torchtitan prints tokens per second). `None` when `s` does not
/// start with one or it is not finite.
pub fn leading_number(s: &str) -> Option<f64> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | 'e' | 'E' | '+' | '-')))
        .unwrap_or(s.len());
    let mut token: String = s[..end].chars().filter(|&c| c != ',').collect();
    // A run such as `1.5e` or `12.-` parses once its tail is dropped.
    while !token.is_empty() {
        if let Ok(v) = token.parse::<f64>() {
            return v.is_finite().then_some(v);
        }
        token.pop();
    }
    None
}

/// The number after the first `key` in `text`, past any `:`, `=` and spaces between them.
pub fn number_after(text: &str, key: &str) -> Option<f64> {
    let at = text.find(key)?;
    let rest = text[at + key.len()..].trim_start_matches([' ', ':', '=']);
    leading_number(rest)
}

/// The number right after the first `key` that starts a word: `tp=` must not read `etp=`'s
/// number, nor `dim=` `head_dim=`'s.
pub fn number_after_word(text: &str, key: &str) -> Option<f64> {
    text.match_indices(key)
        .find(|(at, _)| {
            let before = text.as_bytes().get(at.wrapping_sub(1));
            *at == 0 || before.is_some_and(|b| !b.is_ascii_alphanumeric() && *b != b'_')
        })
        .and_then(|(at, _)| leading_number(&text[at + key.len()..]))
}

/// The size after `key` (see [`number_after`]), where it is a positive whole count: a size of
/// 0 or 2.5 is no size, so the line states nothing rather than something a run cannot have.
pub fn count_after(text: &str, key: &str) -> Option<u32> {
    number_after(text, key).and_then(count).filter(|&n| n > 0)
}

/// `v` as a whole count, when it is one (`4`, `4.0`, `1e3`) and fits in a `u32`.
pub fn count(v: f64) -> Option<u32> {
    (v.fract() == 0.0 && v >= 0.0 && v <= f64::from(u32::MAX)).then_some(v as u32)
}

/// The key and value of a `  key ........ value` line (Megatron-LM's arguments, DeepSpeed's
/// environment report): the word before the first run of dots and what follows it, cut at a
/// second run of dots (some forks print `value.......default`).
pub fn dotted(text: &str) -> Option<(&str, &str)> {
    let dots = text.find(" ..")?;
    let key = text[..dots].split_whitespace().next_back()?;
    let after = text[dots..].trim_start_matches([' ', '.']);
    let value = match after.find("...") {
        Some(end) => &after[..end],
        None => after,
    };
    Some((key, value.trim()))
}

/// A configuration as a log prints it (Megatron's arguments, NeMo's and Megatron-Bridge's
/// dumps, DeepSpeed's engine): each key's value as printed and the line that prints it, so that
/// every fact read from it can name its line.
pub type Settings = BTreeMap<String, (String, usize)>;

/// Records `key`'s `value` from `line` unless an earlier line gave the key: ranks print a
/// configuration over each other and engines print it again, and the readers trust a key's
/// first statement as [`super::state`] trusts a field's.
pub fn keep_first(settings: &mut Settings, key: &str, value: &str, line: usize) {
    settings
        .entry(key.to_string())
        .or_insert_with(|| (value.to_string(), line));
}

/// The first date (`2024-05-01`) in `text`, as logs stamp their lines.
pub fn first_date(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    (0..bytes.len().saturating_sub(9)).find_map(|i| {
        let shape = (0..4).all(|k| digit(i + k))
            && bytes[i + 4] == b'-'
            && digit(i + 5)
            && digit(i + 6)
            && bytes[i + 7] == b'-'
            && digit(i + 8)
            && digit(i + 9);
        let bounded = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let year = text.get(i..i + 2) == Some("20");
        (shape && bounded && year).then(|| text[i..i + 10].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_codes_go_and_text_stays() {
        // torchtitan's step line (metrics.py colours, 24-bit orange included).
        let s = "\u{1b}[31mstep:  1  \u{1b}[38;2;180;60;0mgrad_norm: 20.6  \u{1b}[34mtps: 1,099\u{1b}[39m";
        assert_eq!(strip_ansi(s), "step:  1  grad_norm: 20.6  tps: 1,099");
        assert_eq!(strip_ansi("cut \u{1b}[3"), "cut ");
        assert_eq!(strip_ansi("t\u{1b}]0;title\u{7}x"), "tx");
    }

    #[test]
    fn launcher_prefixes_name_the_rank() {
        assert_eq!(rank_prefix("[rank3]:[titan] step: 1"), Some(3));
        assert_eq!(rank_prefix("[default0]: iteration 10/ 100 |"), Some(0));
        assert_eq!(
            rank_prefix("7: [NeMo I 2025-10-02 13:23:36 utils:662]"),
            Some(7)
        );
        assert_eq!(rank_prefix("[1,5]<stdout>: iteration 3"), Some(5));
        assert_eq!(rank_prefix("node-2: [rank9]: x"), Some(9));
        assert_eq!(rank_prefix(" iteration       20/  500000 |"), None);
        assert_eq!(rank_prefix("Epoch 0: : 47%"), None);
        assert_eq!(rank_prefix("[rank"), None);
    }

    #[test]
    fn numbers_with_commas_exponents_and_junk_after() {
        assert_eq!(leading_number(" 6,123  tflops"), Some(6123.0));
        assert_eq!(leading_number("2e+3,"), Some(2000.0));
        assert_eq!(leading_number("1.5e]"), Some(1.5));
        assert_eq!(leading_number("-12.71"), Some(-12.71));
        assert_eq!(leading_number("inf"), None);
        assert_eq!(leading_number(""), None);
        assert_eq!(number_after("a | tps: 10,050  x", "tps:"), Some(10050.0));
        assert_eq!(
            number_after("global_step=5.000, x", "global_step"),
            Some(5.0)
        );
    }

    #[test]
    fn dotted_keys_and_dates() {
        assert_eq!(
            dotted("  num_layers ...................................... 32"),
            Some(("num_layers", "32"))
        );
        assert_eq!(
            dotted("  master_port ..................... 29500.......................default"),
            Some(("master_port", "29500"))
        );
        assert_eq!(dotted("no dots here"), None);
        assert_eq!(
            first_date("x [2022-10-31 10:59:04,781] y").as_deref(),
            Some("2022-10-31")
        );
        assert_eq!(first_date("id 12024-05-01"), None);
    }

    #[test]
    fn carriage_returns_split_a_line_and_keep_its_number() {
        let got: Vec<(usize, String)> = lines("a\nb\rc\nd")
            .map(|l| (l.number, l.text.into_owned()))
            .collect();
        assert_eq!(
            got,
            [(1, "a"), (2, "b"), (2, "c"), (3, "d")].map(|(n, s)| (n, s.to_string()))
        );
    }
}
