//! Outside text made safe for a terminal, a report or a metric label: schema and table names,
//! digest text, file contents. Its own module: the statement facts and the schema facts both
//! show outside names.

use std::borrow::Cow;

/// Outside text made safe for one line of a terminal or report: control characters escaped,
/// whitespace runs folded to one space, cut at `max_chars` characters with `…`.
pub fn display_text(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            if count >= max_chars {
                out.push('…');
                return out;
            }
            out.push(' ');
            count += 1;
            space = false;
        }
        if count >= max_chars {
            out.truncate(out.trim_end().len());
            out.push('…');
            return out;
        }
        push_escaped(&mut out, c);
        count += 1;
    }
    out
}

/// Whether `c` must not reach a terminal or a report raw: every control character (C0, DEL and
/// C1, U+0080–U+009F), the line and paragraph separators, the bidirectional marks, embeddings,
/// overrides and isolates (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) and the other
/// invisible format characters that can hide or reorder text (U+180E, U+200B–U+200D,
/// U+2060–U+206F, U+FEFF, U+FFF9–U+FFFB, the tag characters U+E0000–U+E007F).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `c` as it may appear in a terminal or report: an [unsafe](is_unsafe_char) character in
/// Rust's `char::escape_default` notation (`\t`, `\n`, `\r`, else `\u{1b}`, `\u{202e}`:
/// lowercase hex, no padding), any other as itself.
fn push_escaped(out: &mut String, c: char) {
    if is_unsafe_char(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// Outside text (from the server, the host or a snapshot) made safe for one line of a terminal
/// or report: every [unsafe](is_unsafe_char) character, `\n` and `\r` included, escaped as
/// `\n`, `\r`, `\u{1b}`, `\u{202e}`. Nothing else changes (no folding, no cut), so ordinary
/// text is returned as it is.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape_except(text, None)
}

/// Like [`escape_text`] for a multi-line block whose line breaks the report prints as such (a
/// remediation): every unsafe character but `\n` escaped, `\r` included.
pub fn escape_lines(text: &str) -> Cow<'_, str> {
    escape_except(text, Some('\n'))
}

fn escape_except(text: &str, keep: Option<char>) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe_char(c) && Some(c) != keep) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if Some(c) == keep {
            out.push(c);
        } else {
            push_escaped(&mut out, c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_text_shows_controls_bidi_and_line_breaks() {
        let raw =
            "a\u{1b}]0;owned\u{7}b\r\nc\u{9b}d\u{7f}e\u{202e}f\u{2066}g\u{200b}\u{feff}\u{0}\t";
        assert_eq!(
            escape_text(raw),
            "a\\u{1b}]0;owned\\u{7}b\\r\\nc\\u{9b}d\\u{7f}e\\u{202e}f\\u{2066}g\\u{200b}\\u{feff}\\u{0}\\t"
        );
        assert_eq!(escape_lines("a\nb\r\u{1b}"), "a\nb\\r\\u{1b}");
        // Ordinary text, non-ASCII and backslashes included, is not copied or changed.
        for ok in [
            "11.8.6-MariaDB-log",
            "Intel® Xeon® × 2 — ok",
            "C:\\path",
            "ünïcode 日本",
        ] {
            assert!(matches!(escape_text(ok), Cow::Borrowed(s) if s == ok));
        }
        assert_eq!(
            display_text("x\u{202e}y\u{2066}", 10),
            "x\\u{202e}y\\u{2066}"
        );
    }
}
