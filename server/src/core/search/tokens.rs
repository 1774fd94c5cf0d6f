//! Words: what text is indexed as, and what a query's terms are matched against.
//!
//! Text splits at everything that is not a letter or a digit, then inside a run at a change
//! of case (`RetryPolicy` → retry, policy; `HTTPServer` → http, server) and between letters
//! and digits (`utf8` → utf, 8). Every word is lowercased. No stemming and no stop words:
//! `auth.rs`, `server/src/auth.rs`, `retry_policy` and `RetryPolicy` are found by their
//! parts, on either backend. A query term that splits into several words is a phrase
//! (`auth.rs` matches "auth" followed by "rs").
//!
//! Text written without spaces between words (Chinese, Japanese, Korean: [`is_cjk`]) is
//! indexed as overlapping pairs of characters (`重试策略` → 重试, 试策, 策略), and a query's
//! such text becomes the phrase of its pairs, so a word is found inside a sentence; a
//! single character is found where it stands alone.
//!
//! A run split so is also indexed whole (`JavaScript` → javascript, `SQLite` → sqlite), after
//! all of a record's parts, so phrases of parts stay side by side; a term of one such run
//! matches either its phrase of parts or the whole word (`RetryPolicy` finds "retry_policy"
//! and "retrypolicy" too; `sqlite` finds "SQLite").

/// A word longer than this is cut to it (hashes, encoded blobs), in text and queries alike.
pub const MAX_WORD_CHARS: usize = 64;

/// The words of one record past this many are not indexed. Postgres keeps word positions
/// up to 16,383: under it, phrase matching is the same on both engines.
pub const MAX_DOC_WORDS: usize = 16_000;

/// Postgres keeps at most 256 positions of one word per record; a record's later
/// occurrences of a word are not indexed on either engine.
pub const MAX_POSITIONS: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Lower,
    Upper,
    Other,
    Digit,
}

fn class(c: char) -> Class {
    if c.is_numeric() {
        Class::Digit
    } else if c.is_uppercase() {
        Class::Upper
    } else if c.is_lowercase() {
        Class::Lower
    } else {
        Class::Other
    }
}

/// A word of a text: where it is, and whether it is a split run kept whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub range: std::ops::Range<usize>,
    pub whole: bool,
}

/// The words of `text` in order, parts only.
pub fn words(text: &str) -> Vec<String> {
    spans(text).into_iter().filter(|w| !w.whole).map(|w| w.text).collect()
}

/// A query term's alternatives: its phrase of parts, and its whole word when the term is
/// one run that splits (`RetryPolicy` → "retry policy" or "retrypolicy").
pub fn term(text: &str) -> Vec<Vec<String>> {
    let spans = spans(text);
    let parts: Vec<String> = spans.iter().filter(|w| !w.whole).map(|w| w.text.clone()).collect();
    let wholes: Vec<&Word> = spans.iter().filter(|w| w.whole).collect();
    let one_run = text.chars().all(char::is_alphanumeric);
    match wholes.as_slice() {
        [whole] if one_run => vec![parts, vec![whole.text.clone()]],
        _ if parts.is_empty() => Vec::new(),
        _ => vec![parts],
    }
}

/// Every word of `text` with where it is in it (byte ranges): each run's parts, then the
/// run whole when it split. For snippets and `doc_words`.
pub fn spans(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut run: Vec<(usize, char)> = Vec::new();
    for (at, c) in text.char_indices() {
        if c.is_alphanumeric() {
            run.push((at, c));
        } else if !run.is_empty() {
            split_run(&run, at, &mut out);
            run.clear();
        }
    }
    if !run.is_empty() {
        split_run(&run, text.len(), &mut out);
    }
    out
}

/// Whether `c` belongs to a script written without spaces between words: Hangul Jamo,
/// Hiragana, Katakana, Hangul compatibility Jamo, Katakana extensions, CJK ideographs
/// (extension A, the main block, compatibility, the supplementary planes), halfwidth
/// Katakana, Hangul syllables. The search migration `cjk_bigrams` lists the same ranges.
pub fn is_cjk(c: char) -> bool {
    matches!(
        u32::from(c),
        0x1100..=0x11FF
            | 0x3040..=0x30FF
            | 0x3130..=0x318F
            | 0x31F0..=0x31FF
            | 0x3400..=0x4DBF
            | 0x4E00..=0x9FFF
            | 0xAC00..=0xD7AF
            | 0xF900..=0xFAFF
            | 0xFF66..=0xFF9D
            | 0x20000..=0x2FFFF
    )
}

/// Splits one run of letters and digits (ending at byte `end`): where it changes between
/// CJK text and other text, then CJK text into pairs and other text at case and digit
/// boundaries. A run of other text that split is also kept whole.
fn split_run(chars: &[(usize, char)], end: usize, out: &mut Vec<Word>) {
    let before = out.len();
    let mut from = 0;
    while from < chars.len() {
        let cjk = is_cjk(chars[from].1);
        let to = from + chars[from..].iter().take_while(|c| is_cjk(c.1) == cjk).count();
        let part_end = chars.get(to).map_or(end, |c| c.0);
        if cjk {
            pairs(&chars[from..to], part_end, out);
        } else {
            split_case(&chars[from..to], part_end, out);
        }
        from = to;
    }
    if out.len() - before > 1 && !chars.iter().any(|c| is_cjk(c.1)) {
        push(chars, end, true, out);
    }
}

/// CJK text as overlapping pairs of characters; a lone character as itself.
fn pairs(chars: &[(usize, char)], end: usize, out: &mut Vec<Word>) {
    if chars.len() == 1 {
        push(chars, end, false, out);
        return;
    }
    for i in 0..chars.len() - 1 {
        push(&chars[i..i + 2], chars.get(i + 2).map_or(end, |c| c.0), false, out);
    }
}

/// Splits text of other scripts at case and digit boundaries.
fn split_case(chars: &[(usize, char)], end: usize, out: &mut Vec<Word>) {
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, cur) = (class(chars[i - 1].1), class(chars[i].1));
        let next = chars.get(i + 1).map(|c| class(c.1));
        let boundary = match (prev, cur) {
            // HTTPServer: the last capital starts the next word.
            (Class::Upper, Class::Upper) => next == Some(Class::Lower),
            (Class::Digit, c) => c != Class::Digit,
            // retryPolicy, v2
            (Class::Lower | Class::Other, Class::Upper) | (_, Class::Digit) => true,
            _ => false,
        };
        if boundary {
            push(&chars[start..i], chars[i].0, false, out);
            start = i;
        }
    }
    push(&chars[start..], end, false, out);
}

fn push(chars: &[(usize, char)], end: usize, whole: bool, out: &mut Vec<Word>) {
    let Some(&(from, _)) = chars.first() else { return };
    let word: String = chars.iter().take(MAX_WORD_CHARS).map(|c| c.1).collect::<String>().to_lowercase();
    // Lowercasing can make a letter several (İ → i̇): keep the word to letters and digits.
    let word: String = word.chars().filter(|c| c.is_alphanumeric()).take(MAX_WORD_CHARS).collect();
    if !word.is_empty() {
        out.push(Word { text: word, range: from..end, whole });
    }
}

/// A record's indexed words: its parts, then its split runs whole; at most
/// `MAX_DOC_WORDS`, each word at most `MAX_POSITIONS` times (later ones are dropped, so
/// positions are the same on both engines).
pub fn doc_words(text: &str) -> Vec<String> {
    let spans = spans(text);
    let (parts, wholes): (Vec<Word>, Vec<Word>) = spans.into_iter().partition(|w| !w.whole);
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for word in parts.into_iter().chain(wholes).map(|w| w.text) {
        if out.len() == MAX_DOC_WORDS {
            break;
        }
        let n = seen.entry(word.clone()).or_insert(0);
        *n += 1;
        if *n <= MAX_POSITIONS {
            out.push(word);
        }
    }
    out
}

/// The words as SQLite's FTS5 indexes them for `project`: each behind the project's
/// prefix (`search::project_prefix`), separated by spaces.
pub fn fts5_text(project: &str, words: &[String]) -> String {
    let prefix = super::project_prefix(project);
    let mut out = String::with_capacity(words.iter().map(|w| w.len() + prefix.len() + 1).sum());
    for w in words {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&prefix);
        out.push_str(w);
    }
    out
}

/// The words as a Postgres `tsvector` literal, each with its positions (from 1). Words
/// hold letters and digits only, so quoting them needs no escapes.
pub fn tsvector_literal(words: &[String]) -> String {
    let mut positions: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, w) in words.iter().enumerate() {
        positions.entry(w.as_str()).or_default().push(i + 1);
    }
    let mut out = String::new();
    for (word, at) in positions {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push('\'');
        out.push_str(word);
        out.push_str("':");
        let at: Vec<String> = at.iter().map(ToString::to_string).collect();
        out.push_str(&at.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(text: &str) -> Vec<String> {
        doc_words(text)
    }

    #[test]
    fn identifiers_and_paths_split_into_their_parts() {
        assert_eq!(w("auth.rs"), ["auth", "rs"]);
        assert_eq!(w("server/src/auth.rs"), ["server", "src", "auth", "rs"]);
        assert_eq!(w("retry_policy"), ["retry", "policy"]);
        assert_eq!(w("RetryPolicy"), ["retry", "policy", "retrypolicy"]);
        assert_eq!(w("retryPolicy"), ["retry", "policy", "retrypolicy"]);
        assert_eq!(w("HTTPServer"), ["http", "server", "httpserver"]);
        assert_eq!(w("SQLite"), ["sq", "lite", "sqlite"]);
        assert_eq!(w("parseHTTP2Request"), ["parse", "http", "2", "request", "parsehttp2request"]);
        assert_eq!(w("utf8 UTF-8"), ["utf", "8", "utf", "8", "utf8"]);
        assert_eq!(
            w("v2.3.1 RetryPolicy docs"),
            ["v", "2", "3", "1", "retry", "policy", "docs", "v2", "retrypolicy"]
        );
        assert_eq!(words("RetryPolicy docs"), ["retry", "policy", "docs"]);
        assert_eq!(term("RetryPolicy"), [vec!["retry", "policy"], vec!["retrypolicy"]]);
        assert_eq!(term("auth.RetryPolicy"), [vec!["auth", "retry", "policy"]]);
        assert_eq!(term("sqlite"), [vec!["sqlite"]]);
        assert_eq!(term("..."), Vec::<Vec<String>>::new());
        assert_eq!(w("Ünïcödé Straße café"), ["ünïcödé", "straße", "café"]);
        assert_eq!(w("!!! -- ..."), Vec::<String>::new());
        let text = "see RetryPolicy.rs";
        let at: Vec<&str> = spans(text).into_iter().map(|w| &text[w.range]).collect();
        assert_eq!(at, ["see", "Retry", "Policy", "RetryPolicy", "rs"]);
    }

    #[test]
    fn text_without_spaces_is_indexed_in_pairs() {
        assert_eq!(w("重试策略"), ["重试", "试策", "策略"]);
        assert_eq!(w("策"), ["策"]);
        assert_eq!(w("修改重试策略。然后"), ["修改", "改重", "重试", "试策", "策略", "然后"]);
        // Kanji and kana together, Hangul with its particle, halfwidth Katakana.
        assert_eq!(w("設定する"), ["設定", "定す", "する"]);
        assert_eq!(w("정책을"), ["정책", "책을"]);
        assert_eq!(w("ﾃｽﾄ"), ["ﾃｽ", "ｽﾄ"]);
        // Mixed with other text: split where the script changes, no whole run.
        assert_eq!(w("API调用"), ["api", "调用"]);
        assert_eq!(w("RetryPolicy策略v2"), ["retry", "policy", "策略", "v", "2"]);
        assert_eq!(term("策略"), [vec!["策略"]]);
        assert_eq!(term("重试策略"), [vec!["重试", "试策", "策略"]]);
        assert_eq!(term("API调用"), [vec!["api", "调用"]]);
        let text = "改重试策略";
        let at: Vec<&str> = spans(text).into_iter().map(|w| &text[w.range]).collect();
        assert_eq!(at, ["改重", "重试", "试策", "策略"]);
    }

    #[test]
    fn long_words_are_cut_and_repeats_capped() {
        let hash = "a".repeat(100);
        assert_eq!(w(&hash), ["a".repeat(MAX_WORD_CHARS)]);
        let text = "x ".repeat(MAX_POSITIONS + 10);
        assert_eq!(doc_words(&text).len(), MAX_POSITIONS);
        let many: Vec<String> = (0..MAX_DOC_WORDS + 5).map(|i| i.to_string()).collect();
        assert_eq!(doc_words(&many.join(" ")).len(), MAX_DOC_WORDS);
    }

    #[test]
    fn engines_get_the_same_words() {
        let words = doc_words("Retry policy: retry twice");
        let p = super::super::project_prefix("github.com/acme/app");
        assert_eq!(fts5_text("github.com/acme/app", &words), format!("{p}retry {p}policy {p}retry {p}twice"));
        assert_eq!(tsvector_literal(&words), "'policy':2 'retry':1,3 'twice':4");
    }
}
