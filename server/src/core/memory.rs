//! Memory categories, their write semantics and caps (docs/architecture.md, Memory).

use std::collections::{BTreeMap, HashMap};

use baton_proto::v1::MemoryOp;

/// How a category is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    /// "The current state": each write replaces the whole set (`REPLACE_SET`).
    CurrentSet,
    /// History: writes append, the oldest beyond the cap are evicted (`APPEND`).
    History,
    /// Keyed notes: one value per key (`UPSERT`).
    Keyed,
}

/// The category of keyed notes.
pub const NOTE: &str = "note";
/// The category of decisions extracted by a model, not recorded on purpose.
pub const EXTRACTED_DECISION: &str = "extracted_decision";

/// Every category with its semantics and default cap (keyed notes have no cap).
pub const CATEGORIES: &[(&str, Semantics, i32)] = &[
    ("goal", Semantics::CurrentSet, 1),
    ("constraint", Semantics::CurrentSet, 5),
    ("open_loop", Semantics::CurrentSet, 5),
    ("recent_change", Semantics::CurrentSet, 20),
    ("decision", Semantics::History, 5),
    ("session_summary", Semantics::History, 1),
    // Decisions a model extracted from a session's transcript (opt-in session summaries):
    // a history of their own, so they never evict a decision someone recorded on purpose.
    (EXTRACTED_DECISION, Semantics::History, 10),
    (NOTE, Semantics::Keyed, 0),
];

/// The largest cap a project may set.
pub const MAX_CAP: i32 = 1000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryRuleError {
    #[error(
        "category: unknown category {0:?}; use one of goal, constraint, open_loop, \
         recent_change, decision, session_summary, extracted_decision, note"
    )]
    UnknownCategory(String),
    #[error("op: category {category:?} is written with {expected}, not {got}")]
    WrongOp { category: String, expected: &'static str, got: &'static str },
    #[error("items: category {category:?} holds at most {cap} items; got {got}")]
    OverCap { category: String, cap: i32, got: usize },
    #[error("items: {0} takes exactly one item")]
    OneItem(&'static str),
    #[error("items: APPEND needs at least one item")]
    EmptyAppend,
    #[error("items: {0} needs at least one item")]
    EmptyItemOp(&'static str),
    #[error(
        "op: ADD_ITEM and REMOVE_ITEM are for current-state categories (goal, constraint, \
         open_loop, recent_change); {category:?} is written with {expected}"
    )]
    ItemOp { category: String, expected: &'static str },
    #[error("key: notes need a key (1..=200 characters)")]
    MissingKey,
    #[error("key: only notes have keys; category {0:?} has none")]
    UnexpectedKey(String),
    #[error("caps: {category:?} cannot have a cap ({reason})")]
    BadCap { category: String, reason: String },
}

/// The semantics of a category.
pub fn semantics(category: &str) -> Result<Semantics, MemoryRuleError> {
    CATEGORIES
        .iter()
        .find(|(name, ..)| *name == category)
        .map(|(_, s, _)| *s)
        .ok_or_else(|| MemoryRuleError::UnknownCategory(category.to_owned()))
}

pub fn op_name(op: MemoryOp) -> &'static str {
    match op {
        MemoryOp::Unspecified => "MEMORY_OP_UNSPECIFIED",
        MemoryOp::ReplaceSet => "REPLACE_SET",
        MemoryOp::Append => "APPEND",
        MemoryOp::Upsert => "UPSERT",
        MemoryOp::AddItem => "ADD_ITEM",
        MemoryOp::RemoveItem => "REMOVE_ITEM",
    }
}

fn expected_op(semantics: Semantics) -> MemoryOp {
    match semantics {
        Semantics::CurrentSet => MemoryOp::ReplaceSet,
        Semantics::History => MemoryOp::Append,
        Semantics::Keyed => MemoryOp::Upsert,
    }
}

/// Effective caps: defaults overridden by the project's settings.
pub fn effective_caps(overrides: &HashMap<String, i32>) -> BTreeMap<String, i32> {
    CATEGORIES
        .iter()
        .filter(|(_, s, _)| *s != Semantics::Keyed)
        .map(|(name, _, cap)| ((*name).to_owned(), overrides.get(*name).copied().unwrap_or(*cap)))
        .collect()
}

/// Checks a `PutMemory` against the category's rules. `op` Unspecified means "the
/// category's own op". Returns the semantics to apply.
pub fn check_put(
    category: &str,
    op: MemoryOp,
    key: &str,
    items: usize,
    cap: i32,
) -> Result<Semantics, MemoryRuleError> {
    let semantics = semantics(category)?;
    let expected = expected_op(semantics);
    let item_op = matches!(op, MemoryOp::AddItem | MemoryOp::RemoveItem);
    if item_op && semantics != Semantics::CurrentSet {
        return Err(MemoryRuleError::ItemOp { category: category.to_owned(), expected: op_name(expected) });
    }
    if op != MemoryOp::Unspecified && op != expected && !item_op {
        return Err(MemoryRuleError::WrongOp {
            category: category.to_owned(),
            expected: op_name(expected),
            got: op_name(op),
        });
    }
    match semantics {
        Semantics::Keyed => {
            if key.is_empty() {
                return Err(MemoryRuleError::MissingKey);
            }
            if items != 1 {
                return Err(MemoryRuleError::OneItem("UPSERT"));
            }
        }
        _ if !key.is_empty() => return Err(MemoryRuleError::UnexpectedKey(category.to_owned())),
        Semantics::CurrentSet if item_op => {
            if items == 0 {
                return Err(MemoryRuleError::EmptyItemOp(op_name(op)));
            }
        }
        Semantics::CurrentSet => {
            if items > usize::try_from(cap).unwrap_or(0) {
                return Err(MemoryRuleError::OverCap { category: category.to_owned(), cap, got: items });
            }
        }
        Semantics::History => {
            if items == 0 {
                return Err(MemoryRuleError::EmptyAppend);
            }
        }
    }
    Ok(semantics)
}

/// Validates a caps change.
pub fn check_caps(caps: &HashMap<String, i32>) -> Result<(), MemoryRuleError> {
    for (category, cap) in caps {
        if semantics(category)? == Semantics::Keyed {
            return Err(MemoryRuleError::BadCap {
                category: category.clone(),
                reason: "notes are not capped".into(),
            });
        }
        if !(1..=MAX_CAP).contains(cap) {
            return Err(MemoryRuleError::BadCap {
                category: category.clone(),
                reason: format!("{cap} is outside 1..={MAX_CAP}"),
            });
        }
    }
    Ok(())
}

/// For history: given the number of live entries before an append (oldest first) and the
/// number appended, how many of the oldest must be evicted.
pub fn evictions(live_before: usize, appended: usize, cap: i32) -> usize {
    let cap = usize::try_from(cap).unwrap_or(0);
    (live_before + appended).saturating_sub(cap)
}

/// The record name of a memory set or note, as shown in conflicts and list replies.
pub fn record_name(category: &str, branch: &str, key: &str) -> String {
    let base = if category == NOTE { format!("note/{key}") } else { format!("memory/{category}") };
    if branch.is_empty() { base } else { format!("{base}@{branch}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_must_match_category() {
        assert_eq!(check_put("goal", MemoryOp::ReplaceSet, "", 1, 1), Ok(Semantics::CurrentSet));
        assert!(matches!(
            check_put("goal", MemoryOp::Append, "", 1, 1),
            Err(MemoryRuleError::WrongOp { .. })
        ));
        assert_eq!(check_put("decision", MemoryOp::Unspecified, "", 2, 5), Ok(Semantics::History));
        assert_eq!(check_put("note", MemoryOp::Upsert, "arch", 1, 0), Ok(Semantics::Keyed));
        assert!(check_put("bogus", MemoryOp::Upsert, "", 1, 0).is_err());
        // Item operations: current-state sets only, at least one item, the cap checked later.
        assert_eq!(check_put("constraint", MemoryOp::AddItem, "", 9, 5), Ok(Semantics::CurrentSet));
        assert_eq!(check_put("open_loop", MemoryOp::RemoveItem, "", 1, 5), Ok(Semantics::CurrentSet));
        assert!(matches!(
            check_put("decision", MemoryOp::AddItem, "", 1, 5),
            Err(MemoryRuleError::ItemOp { .. })
        ));
        assert!(matches!(
            check_put("note", MemoryOp::RemoveItem, "k", 1, 0),
            Err(MemoryRuleError::ItemOp { .. })
        ));
        assert_eq!(
            check_put("goal", MemoryOp::AddItem, "", 0, 1),
            Err(MemoryRuleError::EmptyItemOp("ADD_ITEM"))
        );
    }

    #[test]
    fn caps_and_keys() {
        assert!(matches!(
            check_put("constraint", MemoryOp::ReplaceSet, "", 6, 5),
            Err(MemoryRuleError::OverCap { cap: 5, got: 6, .. })
        ));
        assert!(check_put("constraint", MemoryOp::ReplaceSet, "", 0, 5).is_ok());
        assert_eq!(check_put("note", MemoryOp::Upsert, "", 1, 0), Err(MemoryRuleError::MissingKey));
        assert!(check_put("goal", MemoryOp::ReplaceSet, "k", 1, 1).is_err());
        assert_eq!(check_put("decision", MemoryOp::Append, "", 0, 5), Err(MemoryRuleError::EmptyAppend));
    }

    #[test]
    fn eviction_count() {
        assert_eq!(evictions(5, 1, 5), 1);
        assert_eq!(evictions(2, 1, 5), 0);
        assert_eq!(evictions(1, 3, 1), 3);
    }

    #[test]
    fn caps_override_defaults() {
        let caps = effective_caps(&HashMap::from([("decision".to_owned(), 9)]));
        assert_eq!(caps["decision"], 9);
        assert_eq!(caps["goal"], 1);
        assert!(!caps.contains_key("note"));
        assert!(check_caps(&HashMap::from([("note".to_owned(), 3)])).is_err());
        assert!(check_caps(&HashMap::from([("goal".to_owned(), 0)])).is_err());
    }
}
