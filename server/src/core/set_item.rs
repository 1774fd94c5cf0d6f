//! Set item operations on current-state categories (`ADD_ITEM`, `REMOVE_ITEM`): one item in
//! or out of the set as it is when the write arrives. They are not last-write-wins writes
//! of the whole set, so they work from an offline queue and are never STALE
//! (docs/architecture.md, Last-write-wins with conflict reporting).

use baton_proto::v1::MemoryItem;

use crate::core::lww::{Decision, Policy, WriteIntent};

/// Add or remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetItemOp {
    Add,
    Remove,
}

/// What an item operation does to a set: the items it adds and the entries it takes out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetChange {
    pub add: Vec<MemoryItem>,
    /// Ids of the current entries it removes.
    pub remove: Vec<String>,
    /// Items asked for that were already there (add) or not there (remove): nothing to do.
    pub unchanged: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetItemError {
    #[error("items: {0} needs at least one item")]
    Empty(&'static str),
    #[error(
        "{record} holds at most {} and has {has}; adding {adding} would make {would}: \
         remove one first (REMOVE_ITEM, `baton memory rm`) or raise the cap (SetMemoryCaps)",
        if *cap == 1 { "1 item".to_owned() } else { format!("{cap} items") }
    )]
    OverCap { record: String, cap: i32, has: usize, adding: usize, would: usize },
}

/// Items are the same item when their content is, ignoring surrounding white space.
fn same(a: &str, b: &str) -> bool {
    a.trim() == b.trim()
}

/// Applies an item operation to the current set (`(entry id, content)` in order).
pub fn change(
    op: SetItemOp,
    record: &str,
    current: &[(String, String)],
    items: &[MemoryItem],
    cap: i32,
) -> Result<SetChange, SetItemError> {
    let mut out = SetChange::default();
    match op {
        SetItemOp::Add => {
            if items.is_empty() {
                return Err(SetItemError::Empty("ADD_ITEM"));
            }
            for item in items {
                let present = current.iter().any(|(_, c)| same(c, &item.content))
                    || out.add.iter().any(|a| same(&a.content, &item.content));
                if present {
                    out.unchanged.push(item.content.clone());
                } else {
                    out.add.push(item.clone());
                }
            }
            let would = current.len() + out.add.len();
            let limit = usize::try_from(cap).unwrap_or(0);
            if !out.add.is_empty() && would > limit {
                return Err(SetItemError::OverCap {
                    record: record.to_owned(),
                    cap,
                    has: current.len(),
                    adding: out.add.len(),
                    would,
                });
            }
        }
        SetItemOp::Remove => {
            if items.is_empty() {
                return Err(SetItemError::Empty("REMOVE_ITEM"));
            }
            for item in items {
                let found: Vec<&String> =
                    current.iter().filter(|(_, c)| same(c, &item.content)).map(|(id, _)| id).collect();
                if found.is_empty() {
                    out.unchanged.push(item.content.clone());
                }
                for id in found {
                    if !out.remove.contains(id) {
                        out.remove.push(id.clone());
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The decision for an item operation: it applies to the set as it is, so a queued one is
/// never STALE; a base that is not the set's revision is reported as a conflict (or, with
/// policy REJECT, refuses the write).
pub fn decide(current_revision: i64, intent: WriteIntent) -> Decision {
    match intent.base_revision {
        None => Decision::Applied,
        Some(base) if base == current_revision => Decision::Applied,
        Some(_) if intent.policy == Policy::Reject => Decision::Rejected,
        Some(_) => Decision::Overwritten,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(items: &[&str]) -> Vec<(String, String)> {
        items.iter().enumerate().map(|(i, c)| (format!("e{i}"), (*c).to_owned())).collect()
    }

    fn item(content: &str) -> MemoryItem {
        MemoryItem { content: content.into(), rationale: String::new() }
    }

    #[test]
    fn add_skips_what_is_there_and_keeps_to_the_cap() {
        let set = held(&["a", "b"]);
        let c = change(SetItemOp::Add, "memory/constraint", &set, &[item("c"), item(" a "), item("c")], 3)
            .unwrap();
        assert_eq!(c.add, vec![item("c")]);
        assert_eq!(c.unchanged, vec![" a ".to_owned(), "c".to_owned()]);
        let over = change(SetItemOp::Add, "memory/constraint", &set, &[item("c"), item("d")], 3).unwrap_err();
        assert_eq!(
            over,
            SetItemError::OverCap { record: "memory/constraint".into(), cap: 3, has: 2, adding: 2, would: 4 }
        );
        assert!(over.to_string().contains("at most 3"), "{over}");
        // Adding what is already there changes nothing, so it is never over the cap.
        let full = held(&["a", "b", "c"]);
        assert!(change(SetItemOp::Add, "memory/constraint", &full, &[item("a")], 3).unwrap().add.is_empty());
        assert_eq!(change(SetItemOp::Add, "r", &set, &[], 3), Err(SetItemError::Empty("ADD_ITEM")));
    }

    #[test]
    fn remove_takes_every_match_and_names_what_was_missing() {
        let set = held(&["a", "b", "a"]);
        let c = change(SetItemOp::Remove, "r", &set, &[item("a"), item("zzz")], 5).unwrap();
        assert_eq!(c.remove, vec!["e0".to_owned(), "e2".to_owned()]);
        assert_eq!(c.unchanged, vec!["zzz".to_owned()]);
        assert_eq!(change(SetItemOp::Remove, "r", &set, &[], 5), Err(SetItemError::Empty("REMOVE_ITEM")));
    }

    #[test]
    fn never_stale_and_a_changed_base_is_reported() {
        let queued = |base, policy| WriteIntent { base_revision: base, policy, queued_at_us: Some(1) };
        assert_eq!(decide(7, queued(None, Policy::Overwrite)), Decision::Applied);
        assert_eq!(decide(7, queued(Some(7), Policy::Reject)), Decision::Applied);
        assert_eq!(decide(7, queued(Some(5), Policy::Overwrite)), Decision::Overwritten);
        assert_eq!(decide(7, queued(Some(5), Policy::Reject)), Decision::Rejected);
    }
}
