//! Orchestrators' threads: what their keys, metadata documents and filters may be, which
//! pending writes a write stores, and what a prune keeps. Pure rules; the writes are
//! `service::thread`.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::core::validate::{Invalid, invalid, single_line};

/// A thread key (LangGraph's thread_id), in bytes.
pub const MAX_THREAD: usize = 512;
/// A checkpoint namespace (LangGraph's checkpoint_ns: subgraph paths), in bytes.
pub const MAX_NAMESPACE: usize = 1024;
/// A checkpoint's key (LangGraph makes uuid v6 text), in bytes.
pub const MAX_KEY: usize = 128;
/// A metadata document, as canonical JSON.
pub const MAX_METADATA: usize = 64 * 1024;
/// A task id and a task path, in bytes.
pub const MAX_TASK: usize = 1024;
/// A channel name and a value's type, in bytes.
pub const MAX_CHANNEL: usize = 512;
/// Pending writes in one call.
pub const MAX_WRITES: usize = 1000;
/// Threads (or run ids) named in one delete or prune.
pub const MAX_NAMED: usize = 1000;
/// Checkpoints one CopyThread copies, at most (a larger thread is copied by the caller in
/// parts, or pruned first).
pub const MAX_COPY: usize = 10_000;

/// A thread key: 1..=512 bytes, one line.
pub fn thread(field: &str, value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(invalid(
            field,
            "is required: the orchestrator's key for the thread (LangGraph's thread_id)",
        ));
    }
    single_line(field, value, MAX_THREAD)
}

/// A namespace: "" (the root) or up to 1024 bytes, one line.
pub fn namespace(field: &str, value: &str) -> Result<(), Invalid> {
    single_line(field, value, MAX_NAMESPACE)
}

/// A checkpoint key: 1..=128 bytes, one line.
pub fn key(field: &str, value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(invalid(field, "is required: the orchestrator's id for the checkpoint"));
    }
    single_line(field, value, MAX_KEY)
}

/// A metadata document in its canonical form (keys sorted, no insignificant space), and
/// its "run_id" when that is a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub json: String,
    pub run_id: Option<String>,
}

/// Parses a metadata document: a JSON object ("" is the empty one) of at most 64 KiB, with
/// no NUL in any string (Postgres cannot compare such a document); `redact` sees each string
/// value (secrets are masked before anything is stored).
pub fn metadata(field: &str, text: &str, mut redact: impl FnMut(&mut String)) -> Result<Metadata, Invalid> {
    let mut value = object(field, text)?;
    strings(&mut value, &mut redact);
    let json = canonical(&value);
    if json.len() > MAX_METADATA {
        return Err(invalid(field, format!("is {} bytes as JSON; the limit is {MAX_METADATA}", json.len())));
    }
    let run_id = match value.get("run_id") {
        Some(Value::String(run)) => Some(run.clone()),
        _ => None,
    };
    Ok(Metadata { json, run_id })
}

/// A list's metadata filter: each top-level key with the canonical JSON of the value it
/// must equal, in key order.
pub fn filter(field: &str, text: &str) -> Result<Vec<(String, String)>, Invalid> {
    let Value::Object(map) = object(field, text)? else { return Ok(Vec::new()) };
    if map.len() > 32 {
        return Err(invalid(field, format!("has {} keys; a filter takes at most 32", map.len())));
    }
    let mut out = Vec::new();
    for (key, value) in map {
        if key.is_empty() || key.len() > 256 || key.contains('"') || key.chars().any(char::is_control) {
            return Err(invalid(
                field,
                format!("key {key:?}: a filter key is 1..=256 bytes without '\"' or control characters"),
            ));
        }
        out.push((key, canonical(&value)));
    }
    out.sort();
    Ok(out)
}

fn object(field: &str, text: &str) -> Result<Value, Invalid> {
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        invalid(field, format!("is not valid JSON ({e}); send a JSON object, e.g. {{\"source\": \"loop\"}}"))
    })?;
    if !value.is_object() {
        return Err(invalid(field, "must be a JSON object, e.g. {\"source\": \"loop\"}"));
    }
    if has_nul(&value) {
        return Err(invalid(field, "must not contain NUL characters (\\u0000) in its keys or strings"));
    }
    Ok(value)
}

fn strings(value: &mut Value, redact: &mut impl FnMut(&mut String)) {
    match value {
        Value::String(s) => redact(s),
        Value::Array(items) => items.iter_mut().for_each(|v| strings(v, redact)),
        Value::Object(map) => map.values_mut().for_each(|v| strings(v, redact)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// The canonical text of a JSON value: objects' keys sorted at every depth.
pub fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> = map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// A pending write's key on its checkpoint.
pub type WriteKey = (String, i32);

/// Which of `new` to store, given what the checkpoint has: a write under a key already
/// stored is kept as it is (the first wins: a task's retry writes the same), except on the
/// special channels (negative indexes), whose new value replaces it. Within one call the
/// last write of a key is the one considered.
pub fn writes_to_store<W: Clone>(stored: &HashSet<WriteKey>, new: &[(WriteKey, W)]) -> Vec<W> {
    let mut last: BTreeMap<&WriteKey, &W> = BTreeMap::new();
    for (key, write) in new {
        last.insert(key, write);
    }
    let mut order: Vec<(&WriteKey, &W)> = Vec::new();
    for (key, _) in new {
        if let Some(write) = last.remove(key) {
            order.push((key, write));
        }
    }
    order.into_iter().filter(|(key, _)| key.1 < 0 || !stored.contains(*key)).map(|(_, w)| w.clone()).collect()
}

/// The checkpoints a prune removes from one namespace: all but its `keep` greatest keys.
pub fn pruned<'a>(keys: impl IntoIterator<Item = (&'a str, &'a str)>, keep: usize) -> Vec<String> {
    let mut by_key: Vec<(&str, &str)> = keys.into_iter().collect();
    by_key.sort_by(|a, b| b.0.cmp(a.0));
    by_key.into_iter().skip(keep).map(|(_, id)| id.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_canonical_and_its_run_id_kept() {
        let m = metadata("m", r#"{"step": 1, "source": "loop", "run_id": "r1", "nested": {"b": 1, "a": [2, {"d": 0, "c": 1}]}}"#, |_| {})
            .unwrap();
        assert_eq!(
            m.json,
            r#"{"nested":{"a":[2,{"c":1,"d":0}],"b":1},"run_id":"r1","source":"loop","step":1}"#
        );
        assert_eq!(m.run_id.as_deref(), Some("r1"));
        assert_eq!(metadata("m", "", |_| {}).unwrap().json, "{}");
        assert_eq!(metadata("m", r#"{"run_id": 7}"#, |_| {}).unwrap().run_id, None);
        let masked = metadata("m", r#"{"a": ["x", {"b": "y"}], "n": 1}"#, |s| *s = s.to_uppercase()).unwrap();
        assert_eq!(masked.json, r#"{"a":["X",{"b":"Y"}],"n":1}"#);
    }

    #[test]
    fn bad_metadata_is_refused_saying_why() {
        for (text, says) in [
            ("[1]", "must be a JSON object"),
            ("{", "is not valid JSON"),
            (r#"{"a": "x\u0000y"}"#, "NUL"),
            (r#"{"a\u0000": 1}"#, "NUL"),
        ] {
            let e = metadata("metadata_json", text, |_| {}).unwrap_err();
            assert_eq!(e.field, "metadata_json");
            assert!(e.message.contains(says), "{text}: {}", e.message);
        }
        let big = format!(r#"{{"a": "{}"}}"#, "x".repeat(MAX_METADATA));
        assert!(metadata("m", &big, |_| {}).unwrap_err().message.contains("the limit is"));
    }

    #[test]
    fn a_filter_is_its_keys_with_canonical_values() {
        let f = filter("f", r#"{"step": 2, "source": "input", "o": {"b": 1, "a": 2}}"#).unwrap();
        assert_eq!(
            f,
            vec![
                ("o".to_owned(), r#"{"a":2,"b":1}"#.to_owned()),
                ("source".to_owned(), r#""input""#.to_owned()),
                ("step".to_owned(), "2".to_owned()),
            ]
        );
        assert!(filter("f", "").unwrap().is_empty());
        assert!(filter("f", r#"{"a\"b": 1}"#).unwrap_err().message.contains("filter key"));
        assert!(filter("f", "3").unwrap_err().message.contains("JSON object"));
    }

    #[test]
    fn regular_writes_keep_the_first_special_ones_the_last() {
        let stored: HashSet<WriteKey> = [("t".to_owned(), 0), ("t".to_owned(), -1)].into();
        let new = vec![
            (("t".to_owned(), 0), "again"),
            (("t".to_owned(), 1), "new"),
            (("t".to_owned(), -1), "error replaced"),
            (("u".to_owned(), 0), "first"),
            (("u".to_owned(), 0), "second"),
        ];
        assert_eq!(writes_to_store(&stored, &new), vec!["new", "error replaced", "second"]);
    }

    #[test]
    fn a_prune_keeps_the_greatest_keys() {
        let keys = [("b", "2"), ("d", "4"), ("a", "1"), ("c", "3")];
        assert_eq!(pruned(keys, 1), vec!["3", "2", "1"]);
        assert_eq!(pruned(keys, 0).len(), 4);
        assert!(pruned(keys, 9).is_empty());
    }

    #[test]
    fn keys_are_bounded_single_lines() {
        assert!(thread("thread", "").is_err());
        assert!(thread("thread", &"t".repeat(MAX_THREAD + 1)).is_err());
        assert!(thread("thread", "a\nb").is_err());
        assert!(namespace("namespace", "").is_ok());
        assert!(namespace("namespace", "child:1|grand:2").is_ok());
        assert!(key("key", "1ef0b7a4-0000-6000-8000-000000000000").is_ok());
        assert!(key("key", "").is_err());
    }
}
