//! A hit's snippet: the part of its body around the first words the query looks for, with
//! where those words are in it. Cut here from the stored body, the same on both backends.

use std::collections::HashSet;
use std::ops::Range;

use super::tokens;

/// A snippet's length, about (in characters).
pub const SNIPPET_CHARS: usize = 240;
/// How much of the body before the first match a snippet shows, about (in characters).
const LEAD_CHARS: usize = 60;

/// A snippet: its text, and the byte ranges in it of the words the query looks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snippet {
    pub text: String,
    pub highlights: Vec<Range<usize>>,
}

/// The snippet of `body` for a query looking for `wanted` words.
pub fn of(body: &str, wanted: &[&str]) -> Snippet {
    let wanted: HashSet<&str> = wanted.iter().copied().collect();
    let spans = tokens::spans(body);
    let hits: Vec<&Range<usize>> =
        spans.iter().filter(|w| wanted.contains(w.text.as_str())).map(|w| &w.range).collect();
    let first = hits.first().map_or(0, |r| r.start);
    let start = back_chars(body, first, LEAD_CHARS);
    // Start at a line's or a word's beginning when one is near: just past that newline or
    // white space, which may be wider than a byte (a no-break space, an ideographic space).
    let after = |(i, c): (usize, char)| start + i + c.len_utf8();
    let lead = &body[start..first];
    let start = match lead.char_indices().find(|(_, c)| *c == '\n') {
        Some(newline) => after(newline),
        None if start == 0 => 0,
        None => lead.char_indices().find(|(_, c)| c.is_whitespace()).map_or(start, after),
    };
    let end = forward_chars(body, start, SNIPPET_CHARS);
    let mut text = String::new();
    let prefix = if start > 0 { "…" } else { "" };
    text.push_str(prefix);
    text.push_str(&body[start..end].replace('\n', " "));
    if end < body.len() {
        text.push('…');
    }
    // A whole identifier and its parts both match: highlight each place once.
    let mut shown: Vec<&Range<usize>> =
        hits.into_iter().filter(|r| r.start >= start && r.end <= end).collect();
    shown.sort_by_key(|r| r.start);
    let mut highlights: Vec<Range<usize>> = Vec::new();
    for r in shown {
        let r = (r.start - start + prefix.len())..(r.end - start + prefix.len());
        match highlights.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => highlights.push(r),
        }
    }
    Snippet { text, highlights }
}

fn back_chars(s: &str, from: usize, n: usize) -> usize {
    s[..from].char_indices().rev().nth(n.saturating_sub(1)).map_or(0, |(i, _)| i)
}

fn forward_chars(s: &str, from: usize, n: usize) -> usize {
    s[from..].char_indices().nth(n).map_or(s.len(), |(i, _)| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(s: &Snippet) -> String {
        let mut out = s.text.clone();
        for r in s.highlights.iter().rev() {
            out.insert(r.end, ']');
            out.insert(r.start, '[');
        }
        out
    }

    #[test]
    fn words_are_highlighted_where_they_are() {
        let s = of("We chose a RetryPolicy with backoff.\nretry twice", &["retry", "policy"]);
        assert_eq!(marked(&s), "We chose a [Retry][Policy] with backoff. [retry] twice");
        let s = of("We chose a RetryPolicy", &["retry", "policy", "retrypolicy"]);
        assert_eq!(marked(&s), "We chose a [RetryPolicy]");
    }

    #[test]
    fn a_long_body_is_cut_around_the_first_match() {
        let body = format!("{} needle here {}", "word ".repeat(200), "tail ".repeat(200));
        let s = of(&body, &["needle"]);
        assert!(s.text.starts_with('…') && s.text.ends_with('…'), "{}", s.text);
        assert_eq!(s.highlights.len(), 1);
        assert_eq!(&s.text[s.highlights[0].clone()], "needle");
        assert!(s.text.chars().count() <= SNIPPET_CHARS + 2);
    }

    /// White space wider than a byte before the match (a no-break space, an ideographic
    /// space in Japanese text) starts the snippet just past it, not inside it.
    #[test]
    fn wide_white_space_before_the_match() {
        for space in ['\u{a0}', '\u{3000}', '\u{2028}'] {
            let body = format!("{}{space}needle2 common words", "y".repeat(100));
            let s = of(&body, &["needle2"]);
            assert!(s.text.starts_with("…needle2"), "{space:?}: {}", s.text);
            assert_eq!(&s.text[s.highlights[0].clone()], "needle2");
        }
        let japanese = format!("{}これは\u{3000}テスト needle です", "日本語の文章。".repeat(20));
        let s = of(&japanese, &["needle"]);
        assert_eq!(&s.text[s.highlights[0].clone()], "needle");
    }

    proptest::proptest! {
        /// No text and no word looked for can make a snippet panic, and every highlight is
        /// a char-boundary range of the snippet.
        #[test]
        fn any_text_any_match(body in "\\PC{0,400}", pick in 0usize..64, extra in "\\PC{0,8}") {
            let words: Vec<String> = tokens::spans(&body).into_iter().map(|w| w.text).collect();
            let mut wanted: Vec<&str> = words.iter().skip(pick % words.len().max(1)).take(2).map(String::as_str).collect();
            wanted.push(&extra);
            let s = of(&body, &wanted);
            for r in &s.highlights {
                proptest::prop_assert!(s.text.get(r.clone()).is_some(), "{:?} in {:?}", r, s.text);
            }
        }

        /// Bodies built of white space of every width around the word.
        #[test]
        fn white_space_of_every_width(
            parts in proptest::collection::vec(proptest::prop_oneof!["[a-z]{1,12}", "[ \\t\\n\u{a0}\u{3000}\u{2028}\u{2003}]{1,3}", "[ぁ-ん]{1,5}"], 0..120),
        ) {
            let body: String = parts.concat();
            let s = of(&body, &["needle", "a"]);
            for r in &s.highlights {
                proptest::prop_assert!(s.text.get(r.clone()).is_some());
            }
        }
    }

    #[test]
    fn a_body_without_the_words_gives_its_start() {
        let s = of("ünïcödé text", &["absent"]);
        assert_eq!(s.text, "ünïcödé text");
        assert!(s.highlights.is_empty());
    }
}
