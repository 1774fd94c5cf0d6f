//! Item logs' rules (`ItemLogService`), as pure functions: what a key, an item and a summary
//! may be, which items of an append are new, and how a listing groups keys by a delimiter.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::core::validate::{Invalid, invalid, single_line};

/// A log key's bytes at most.
pub const MAX_LOG_KEY: usize = 1024;
/// An item key's bytes at most.
pub const MAX_ITEM_KEY: usize = 256;
pub const MAX_CONTENT_TYPE: usize = 128;
/// Items one append may carry.
pub const MAX_APPEND: usize = 1000;
/// A summary's bytes at most.
pub const MAX_SUMMARY: usize = 64 * 1024;
/// Keys, and prefixes, one delete may name.
pub const MAX_DELETE_KEYS: usize = 1000;
pub const MAX_DELETE_PREFIXES: usize = 100;
/// Logs one delete removes at most (its reply says when a prefix holds more).
pub const MAX_DELETED_LOGS: usize = 10_000;
/// What an item without a content type is.
pub const DEFAULT_CONTENT_TYPE: &str = "application/json";

/// A log key: 1..=1024 bytes, one line.
pub fn log_key(field: &str, value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(invalid(field, "is required: the log's key (e.g. a conversation id)"));
    }
    single_line(field, value, MAX_LOG_KEY)
}

/// A prefix of log keys: "" or up to 1024 bytes, one line.
pub fn prefix(field: &str, value: &str) -> Result<(), Invalid> {
    single_line(field, value, MAX_LOG_KEY)
}

/// An item's key ("" = none) and content type ("" = JSON), as stored.
pub fn item_labels(field: &str, key: &str, content_type: &str) -> Result<(Option<String>, String), Invalid> {
    single_line(&format!("{field}.key"), key, MAX_ITEM_KEY)?;
    let content_field = format!("{field}.content_type");
    if content_type.len() > MAX_CONTENT_TYPE {
        return Err(invalid(
            content_field,
            format!("is {} bytes; the limit is {MAX_CONTENT_TYPE}", content_type.len()),
        ));
    }
    if !content_type.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(invalid(
            content_field,
            "must be printable ASCII (a media type such as \"application/json\")",
        ));
    }
    let content_type = if content_type.is_empty() { DEFAULT_CONTENT_TYPE } else { content_type };
    Ok(((!key.is_empty()).then(|| key.to_owned()), content_type.to_owned()))
}

/// A summary: "" (none) or a JSON value of at most 64 KiB, kept as given.
pub fn summary(field: &str, value: &str) -> Result<(), Invalid> {
    if value.len() > MAX_SUMMARY {
        return Err(invalid(field, format!("is {} bytes; the limit is {MAX_SUMMARY}", value.len())));
    }
    if value.contains('\0') {
        return Err(invalid(field, "must not contain NUL bytes (\\0)"));
    }
    if !value.is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(value).is_err() {
        return Err(invalid(field, "is not JSON: send a JSON value (e.g. an object), or \"\" to clear it"));
    }
    Ok(())
}

/// A listing's delimiter: none, or one ASCII character that is not a control character.
pub fn delimiter(field: &str, value: &str) -> Result<Option<u8>, Invalid> {
    match value.as_bytes() {
        [] => Ok(None),
        [b] if b.is_ascii_graphic() || *b == b' ' => Ok(Some(*b)),
        _ => Err(invalid(field, "must be empty or one printable ASCII character (e.g. \"/\")")),
    }
}

/// Which items of an append are stored: not those whose key is in the log already or came
/// earlier in the same append (the first one wins).
pub fn fresh(stored: &HashSet<String>, keys: &[Option<String>]) -> Vec<bool> {
    let mut seen: HashSet<&str> = HashSet::new();
    keys.iter()
        .map(|key| match key {
            Some(k) => !stored.contains(k) && seen.insert(k.as_str()),
            None => true,
        })
        .collect()
}

/// Where a key falls in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Not under the prefix: past the listing's end (keys come in order).
    Beyond,
    /// Listed as a log.
    Log,
    /// Grouped under this common prefix (up to and including the delimiter).
    Common(String),
}

/// A listing of logs under a prefix, grouped by a delimiter.
#[derive(Debug, Clone)]
pub struct Listing {
    pub prefix: String,
    pub delimiter: Option<u8>,
}

impl Listing {
    pub fn place(&self, key: &str) -> Place {
        let Some(rest) = key.strip_prefix(self.prefix.as_str()) else { return Place::Beyond };
        match self.delimiter.and_then(|d| rest.bytes().position(|b| b == d)) {
            // The delimiter is ASCII: the cut is at a char boundary.
            Some(at) => Place::Common(key[..=self.prefix.len() + at].to_owned()),
            None => Place::Log,
        }
    }
}

/// The first key after every key that starts with `common` (a common prefix, which ends with
/// its ASCII delimiter): the delimiter's byte, plus one.
pub fn after_common(common: &str) -> String {
    let mut bytes = common.as_bytes().to_vec();
    if let Some(last) = bytes.last_mut() {
        *last += 1;
    }
    // An ASCII byte plus one is still ASCII (at most DEL), so the text stays UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

/// Where the next page of a listing starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListFrom {
    /// After this log's key.
    Key(String),
    /// After every key of this common prefix.
    Common(String),
}

/// Where the next page of a read starts: after this seq, up to the first page's newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFrom {
    pub after: i64,
    pub through: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_skips_stored_keys_and_repeats_keeping_the_first() {
        let stored = HashSet::from(["a".to_owned()]);
        let keys = [Some("a".into()), None, Some("b".into()), Some("b".into()), None, Some("c".into())];
        assert_eq!(fresh(&stored, &keys), [false, true, true, false, true, true]);
    }

    #[test]
    fn a_listing_groups_by_the_delimiter_after_the_prefix() {
        let l = Listing { prefix: "p/".into(), delimiter: Some(b'/') };
        assert_eq!(l.place("p/s1"), Place::Log);
        assert_eq!(l.place("p/s1/sub/a"), Place::Common("p/s1/".into()));
        assert_eq!(l.place("q/s1"), Place::Beyond);
        assert_eq!(l.place("p"), Place::Beyond);
        let flat = Listing { prefix: "p/".into(), delimiter: None };
        assert_eq!(flat.place("p/s1/sub/a"), Place::Log);
        let all = Listing { prefix: String::new(), delimiter: Some(b'/') };
        assert_eq!(all.place("x/y"), Place::Common("x/".into()));
        assert_eq!(all.place("é/y"), Place::Common("é/".into()));
    }

    #[test]
    fn after_a_common_prefix_comes_the_first_key_past_all_of_it() {
        let next = after_common("p/s1/");
        assert_eq!(next, "p/s10");
        for under in ["p/s1/", "p/s1/a", "p/s1/\u{10ffff}"] {
            assert!(under < next.as_str(), "{under}");
        }
        assert!("p/s1" < next.as_str() && next.as_str() <= "p/s10");
    }

    #[test]
    fn labels_default_and_refuse() {
        assert_eq!(item_labels("i", "", "").unwrap(), (None, DEFAULT_CONTENT_TYPE.to_owned()));
        assert_eq!(item_labels("i", "u1", "text/plain").unwrap(), (Some("u1".into()), "text/plain".into()));
        assert!(item_labels("i", "a\nb", "").is_err());
        assert!(item_labels("i", "", "tëxt").is_err());
        assert!(item_labels("i", &"k".repeat(MAX_ITEM_KEY + 1), "").is_err());
    }

    #[test]
    fn summaries_are_json_or_empty() {
        assert!(summary("s", "").is_ok());
        assert!(summary("s", r#"{"a":1}"#).is_ok());
        assert!(summary("s", "{").is_err());
        assert!(summary("s", &format!("\"{}\"", "x".repeat(MAX_SUMMARY))).is_err());
    }

    #[test]
    fn delimiters_are_one_printable_ascii_character() {
        assert_eq!(delimiter("d", "").unwrap(), None);
        assert_eq!(delimiter("d", "/").unwrap(), Some(b'/'));
        for bad in ["//", "\n", "é"] {
            assert!(delimiter("d", bad).is_err(), "{bad:?}");
        }
    }
}
