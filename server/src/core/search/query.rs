//! The query language, one for both backends: words, "quoted phrases", `-exclusions` and
//! `OR`, as in a web search. Parsed here into a `Query`, then written for FTS5 or as a
//! `tsquery` from its words alone, so every input is either a valid query for the engine or
//! an `INVALID_ARGUMENT` that says what is wrong.
//!
//! - `retry policy`: both words, anywhere (all terms must match);
//! - `"retry policy"`: the words side by side, in order;
//! - `auth.rs`, `RetryPolicy`: a term that splits into several words is a phrase;
//! - `-flaky`, `-"work in progress"`: records without it;
//! - `sqlite OR postgres`: either (binds tighter than the implicit AND: `a b OR c` is
//!   a AND (b OR c)); `or` in lowercase is a word.

use super::tokens;
use crate::core::validate::{Invalid, invalid};

pub const MAX_QUERY_BYTES: usize = 1000;
pub const MAX_TERMS: usize = 32;
/// Words in one phrase: every word of a phrase is looked up and its positions compared in
/// every document that holds them all, so a phrase's cost grows with its length.
pub const MAX_PHRASE_WORDS: usize = 24;
/// Words in the whole query.
pub const MAX_WORDS: usize = 64;

/// Words side by side, in order (one word is a phrase of one).
pub type Phrase = Vec<String>;

/// A parsed query: every group must match (a group is phrases of which one must), and no
/// excluded phrase may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub all: Vec<Vec<Phrase>>,
    pub none: Vec<Phrase>,
}

#[derive(Debug, PartialEq, Eq)]
enum Item {
    /// A term: phrases of which one must match (`tokens::term`).
    Term {
        phrases: Vec<Phrase>,
        excluded: bool,
    },
    Or,
}

/// Parses a query; the error names what is wrong.
pub fn parse(text: &str) -> Result<Query, Invalid> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(invalid(
            "query",
            format!("is {} bytes; at most {MAX_QUERY_BYTES} are accepted", text.len()),
        ));
    }
    let items = lex(text)?;
    if items.iter().filter(|i| matches!(i, Item::Term { .. })).count() > MAX_TERMS {
        return Err(invalid("query", format!("has more than {MAX_TERMS} terms; search for fewer")));
    }
    let phrases = items.iter().flat_map(|i| match i {
        Item::Term { phrases, .. } => phrases.as_slice(),
        Item::Or => &[],
    });
    let mut words = 0;
    for phrase in phrases {
        if phrase.len() > MAX_PHRASE_WORDS {
            return Err(invalid(
                "query",
                format!(
                    "has a phrase of {} words; at most {MAX_PHRASE_WORDS} are searched for together \
                     (quote the most telling part)",
                    phrase.len()
                ),
            ));
        }
        words += phrase.len();
    }
    if words > MAX_WORDS {
        return Err(invalid("query", format!("has {words} words; at most {MAX_WORDS} are searched for")));
    }
    group(items)
}

/// Splits the query into terms and ORs.
fn lex(text: &str) -> Result<Vec<Item>, Invalid> {
    let mut items = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (excluded, body) = match rest.strip_prefix('-') {
            Some(after) if after.starts_with('"') || after.starts_with(|c: char| !c.is_whitespace()) => {
                (true, after)
            }
            _ => (false, rest),
        };
        let (raw, quoted, next) = if let Some(inner) = body.strip_prefix('"') {
            let Some(end) = inner.find('"') else {
                return Err(invalid(
                    "query",
                    "has a \" that is never closed; close the phrase or drop the quote",
                ));
            };
            (&inner[..end], true, &inner[end + 1..])
        } else {
            let end = body.find(char::is_whitespace).unwrap_or(body.len());
            (&body[..end], false, &body[end..])
        };
        rest = next.trim_start();
        if raw == "OR" && !quoted && !excluded {
            items.push(Item::Or);
            continue;
        }
        // A quoted phrase is its words side by side; a bare term may also be one whole word.
        let phrases = if quoted { vec![tokens::words(raw)] } else { tokens::term(raw) };
        if phrases.iter().all(Vec::is_empty) {
            if quoted {
                return Err(invalid("query", format!("has a phrase with no words in it: \"{raw}\"")));
            }
            // Punctuation alone is not indexed: a term of it matches nothing and means nothing.
            continue;
        }
        items.push(Item::Term { phrases, excluded });
    }
    Ok(items)
}

/// Groups terms joined by OR; checks that each OR stands between two included terms.
fn group(items: Vec<Item>) -> Result<Query, Invalid> {
    let mut query = Query { all: Vec::new(), none: Vec::new() };
    let mut joining = false;
    let mut last_included = false;
    for item in items {
        match item {
            Item::Or if !last_included || joining => {
                return Err(invalid(
                    "query",
                    "has an OR without a word or phrase before it (OR joins two terms, neither excluded)",
                ));
            }
            Item::Or => joining = true,
            Item::Term { excluded: true, .. } if joining => {
                return Err(invalid(
                    "query",
                    "has an OR before an excluded term; OR joins two terms, neither excluded",
                ));
            }
            Item::Term { phrases, excluded: true } => {
                query.none.extend(phrases);
                last_included = false;
            }
            Item::Term { phrases, excluded: false } => {
                match query.all.last_mut() {
                    Some(group) if joining => group.extend(phrases),
                    _ => query.all.push(phrases),
                }
                joining = false;
                last_included = true;
            }
        }
    }
    if joining {
        return Err(invalid("query", "ends with OR; OR joins two terms"));
    }
    if query.all.is_empty() {
        return Err(invalid(
            "query",
            if query.none.is_empty() {
                "has no words to search for (punctuation alone is not indexed)"
            } else {
                "only excludes; add a word or phrase to search for"
            },
        ));
    }
    Ok(query)
}

impl Query {
    /// The query in FTS5's syntax for a search in `project`: every word behind the
    /// project's prefix (`search::project_prefix`) in a quoted string (words hold letters
    /// and digits only), phrases as one quoted string, `AND`, `OR` and `NOT` between them.
    pub fn fts5(&self, project: &str) -> String {
        let prefix = super::project_prefix(project);
        let phrase = |p: &Phrase| {
            let words: Vec<String> = p.iter().map(|w| format!("{prefix}{w}")).collect();
            format!("\"{}\"", words.join(" "))
        };
        let groups: Vec<String> = self
            .all
            .iter()
            .map(|g| format!("({})", g.iter().map(phrase).collect::<Vec<_>>().join(" OR ")))
            .collect();
        let mut out = format!("({})", groups.join(" AND "));
        for p in &self.none {
            out.push_str(" NOT ");
            out.push_str(&phrase(p));
        }
        out
    }

    /// The query as a Postgres `tsquery` literal: `&`, `|`, `!` and `<->` between quoted
    /// words, so no dictionary or parser of Postgres touches them.
    pub fn tsquery(&self) -> String {
        let phrase = |p: &Phrase| {
            let words: Vec<String> = p.iter().map(|w| format!("'{w}'")).collect();
            format!("({})", words.join(" <-> "))
        };
        let mut parts: Vec<String> = self
            .all
            .iter()
            .map(|g| format!("({})", g.iter().map(phrase).collect::<Vec<_>>().join(" | ")))
            .collect();
        parts.extend(self.none.iter().map(|p| format!("!{}", phrase(p))));
        parts.join(" & ")
    }

    /// Every word the query looks for (not the excluded ones), for highlighting.
    pub fn wanted(&self) -> Vec<&str> {
        self.all.iter().flatten().flatten().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A phrase's cost grows with its words: long ones are refused, as are queries of
    /// many words in all.
    #[test]
    fn long_phrases_are_refused() {
        let words = |n: usize| vec!["word"; n].join(" ");
        assert!(parse(&format!("\"{}\"", words(MAX_PHRASE_WORDS))).is_ok());
        let err = parse(&format!("\"{}\"", words(MAX_PHRASE_WORDS + 1))).unwrap_err();
        assert!(err.message.contains("a phrase of 25 words"), "{err}");
        // A term that splits into words is a phrase too.
        let dotted = vec!["part"; 30].join(".");
        assert!(parse(&dotted).is_err());
        let many = (0..3).map(|_| format!("\"{}\"", words(22))).collect::<Vec<_>>().join(" ");
        assert!(parse(&many).unwrap_err().message.contains("66 words"));
    }

    fn q(text: &str) -> Query {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"))
    }

    fn bad(text: &str) -> String {
        parse(text).expect_err(text).to_string()
    }

    fn words(list: &[&str]) -> Phrase {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn words_phrases_exclusions_and_or() {
        let query = q(r#"retry "Work In progress" -flaky a OR b.rs OR c -"x y""#);
        assert_eq!(
            query.all,
            vec![
                vec![words(&["retry"])],
                vec![words(&["work", "in", "progress"])],
                vec![words(&["a"]), words(&["b", "rs"]), words(&["c"])],
            ]
        );
        assert_eq!(query.none, vec![words(&["flaky"]), words(&["x", "y"])]);
        let p = super::super::project_prefix("p");
        assert_eq!(
            query.fts5("p"),
            format!(
                r#"(("{p}retry") AND ("{p}work {p}in {p}progress") AND ("{p}a" OR "{p}b {p}rs" OR "{p}c")) NOT "{p}flaky" NOT "{p}x {p}y""#
            )
        );
        assert_eq!(
            query.tsquery(),
            "(('retry')) & (('work' <-> 'in' <-> 'progress')) & (('a') | ('b' <-> 'rs') | ('c')) & !('flaky') & !('x' <-> 'y')"
        );
    }

    #[test]
    fn identifiers_are_phrases_and_punctuation_is_dropped() {
        assert_eq!(q("RetryPolicy").all, vec![vec![words(&["retry", "policy"]), words(&["retrypolicy"])]]);
        assert_eq!(q("-RetryPolicy x").none, vec![words(&["retry", "policy"]), words(&["retrypolicy"])]);
        assert_eq!(q("\"RetryPolicy docs\"").all, vec![vec![words(&["retry", "policy", "docs"])]]);
        assert_eq!(q("server/src/auth.rs && ||").all, vec![vec![words(&["server", "src", "auth", "rs"])]]);
        assert_eq!(q("or and not").all.len(), 3, "lowercase or is a word");
        assert_eq!(q("- a").all, vec![vec![words(&["a"])]], "a lone dash is punctuation");
        assert_eq!(q("NEAR(a b) * ^ : \\ '").all.len(), 2, "engine syntax is just text");
    }

    #[test]
    fn what_is_refused_says_why() {
        assert!(bad("").contains("no words"));
        assert!(bad("!!! ...").contains("no words"));
        assert!(bad("-flaky").contains("only excludes"));
        assert!(bad("\"open").contains("never closed"));
        assert!(bad("\"...\"").contains("phrase with no words"));
        assert!(bad("OR a").contains("OR without"));
        assert!(bad("a OR").contains("ends with OR"));
        assert!(bad("a OR OR b").contains("OR without"));
        assert!(bad("a OR -b").contains("excluded"));
        assert!(bad("-a OR b").contains("OR without"));
        assert!(bad(&"x".repeat(MAX_QUERY_BYTES + 1)).contains("bytes"));
        assert!(bad(&"w ".repeat(MAX_TERMS + 1)).contains("terms"));
    }
}
