//! Text for a terminal. What the tuner prints carries text it did not write: error bodies and
//! label values (`hostname`) from a Prometheus reply, node names and sources from measurement
//! files. A raw escape sequence there recolours, retitles or clears the user's terminal, and a
//! bidirectional override reorders what is shown (issue 31), so the binary passes its tables,
//! notes and errors through [`escape_controls`] as it prints them. JSON and YAML documents are
//! left to their writers, which escape control characters in their own syntax.

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

/// Whether `c` acts on the terminal rather than being shown by it.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31: a `hostname` label of `n\e[31mX` turned the rest of the terminal red.
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
}
