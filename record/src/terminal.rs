//! Text for a terminal. What the binaries print carries text they did not write: error bodies
//! and label values (`hostname`) from a Prometheus reply, node names and sources from
//! measurement files, lines of an nccl-tests log. A raw escape sequence there recolours,
//! retitles or clears the user's terminal, and a bidirectional override reorders what is shown,
//! so the tuner and microbench pass their tables, notes and errors through [`escape_controls`]
//! as they print them. JSON and YAML documents are left to their writers, which escape control
//! characters in their own syntax.

use std::borrow::Cow;

/// `text` with each control character but newline and tab (C0, DEL, C1), and each
/// bidirectional embedding, override or isolate, written as a Rust escape (`\u{1b}`, `\r`,
/// `\u{202e}`); text with none of them comes back as it is.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.contains(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `line` as [`escape_controls`] shows it, with newlines and tabs escaped too: a note or a
/// skipped series is one line, and a label value holding a newline (`hostname="n1\nok"`) must
/// not print a second line that looks like the binary's own.
pub fn escape_line(line: &str) -> Cow<'_, str> {
    let breaks = |c: char| c == '\n' || c == '\t';
    if !line.contains(|c| hidden(c) || breaks(c)) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        match c {
            c if breaks(c) => out.extend(c.escape_default()),
            c if hidden(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `c` acts on the terminal rather than being shown by it.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `hostname` label of `n\e[31mX` turned the rest of the terminal red.
    #[test]
    fn escapes_are_shown_not_acted_on() {
        assert_eq!(
            escape_controls("n\u{1b}[31mX \u{1b}]0;title\u{7} \r\0 \u{9b}2J"),
            "n\\u{1b}[31mX \\u{1b}]0;title\\u{7} \\u{d}\\u{0} \\u{9b}2J"
        );
        assert_eq!(
            escape_controls("abc\u{202e}fed\u{2066}"),
            "abc\\u{202e}fed\\u{2066}"
        );
        let plain = "node ┆ all_reduce\n\tGPU-0 μs\n";
        assert!(matches!(escape_controls(plain), Cow::Borrowed(s) if s == plain));
        // Escaping twice changes nothing more: no control character is left to escape.
        let once = escape_controls("\u{1b}[2J").into_owned();
        assert_eq!(escape_controls(&once), once);
    }

    #[test]
    fn a_line_stays_one_line() {
        assert_eq!(
            escape_line("node n1\ntuner: note: all 8 nodes healthy\t\u{1b}[0m"),
            "node n1\\ntuner: note: all 8 nodes healthy\\t\\u{1b}[0m"
        );
        assert!(matches!(escape_line("n1 ┆ μs"), Cow::Borrowed("n1 ┆ μs")));
    }
}
