//! Retention rules for checkpoints, as pure functions: which checkpoints a project keeps and
//! how survivors are re-parented. The store walks the chains (verifying old ancestors'
//! digests, which needs the database) and applies the plan in one write.
//!
//! Rules (docs/architecture.md, Retention): every checkpoint younger than the cut-off is
//! kept; beyond it, each session's head and its K nearest valid ancestors. A survivor whose
//! parent goes is re-pointed at its nearest kept ancestor: checkpoints are full snapshots,
//! so no restore needs the removed ones.

use std::collections::{HashMap, HashSet};

/// A checkpoint as retention sees it.
#[derive(Debug, Clone)]
pub struct Node {
    pub parent: Option<String>,
    pub created_us: i64,
}

/// What a retention run does to one project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Sorted, for stable reports.
    pub remove: Vec<String>,
    /// (checkpoint, new parent or None for a new root), sorted by checkpoint.
    pub reparent: Vec<(String, Option<String>)>,
}

/// The ancestors of `head`, nearest first (through any session: a resumed session's first
/// checkpoint points into its predecessor). Stops at a missing parent or a cycle.
pub fn ancestors(nodes: &HashMap<String, Node>, head: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::from([head.to_owned()]);
    let mut at = nodes.get(head).and_then(|n| n.parent.clone());
    while let Some(id) = at.take() {
        if !seen.insert(id.clone()) {
            break;
        }
        let Some(node) = nodes.get(&id) else { break };
        at.clone_from(&node.parent);
        out.push(id);
    }
    out
}

/// Picks the kept set: everything young, every head, and per head its `keep_ancestors`
/// nearest valid ancestors. `valid` is asked only about old ancestors that could count.
pub fn keep_set(
    nodes: &HashMap<String, Node>,
    heads: &[String],
    cutoff_us: i64,
    keep_ancestors: usize,
    mut valid: impl FnMut(&str) -> bool,
) -> HashSet<String> {
    let mut keep: HashSet<String> =
        nodes.iter().filter(|(_, n)| n.created_us >= cutoff_us).map(|(id, _)| id.clone()).collect();
    for head in heads.iter().filter(|h| nodes.contains_key(*h)) {
        keep.insert(head.clone());
        let mut kept = 0;
        for id in ancestors(nodes, head) {
            if kept >= keep_ancestors {
                break;
            }
            let young = nodes.get(&id).is_some_and(|n| n.created_us >= cutoff_us);
            if young || keep.contains(&id) || valid(&id) {
                keep.insert(id);
                kept += 1;
            }
        }
    }
    keep
}

/// Removes what is not kept and re-parents the survivors.
pub fn plan(nodes: &HashMap<String, Node>, keep: &HashSet<String>) -> Plan {
    let mut remove: Vec<String> = nodes.keys().filter(|id| !keep.contains(*id)).cloned().collect();
    remove.sort();
    let mut reparent = Vec::new();
    for (id, node) in nodes.iter().filter(|(id, _)| keep.contains(*id)) {
        let Some(parent) = &node.parent else { continue };
        if keep.contains(parent) || !nodes.contains_key(parent) {
            continue;
        }
        let new_parent = ancestors(nodes, id).into_iter().find(|a| keep.contains(a));
        reparent.push((id.clone(), new_parent));
    }
    reparent.sort();
    Plan { remove, reparent }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000;

    /// A chain c0 ← c1 ← … ← c{n-1}, c_i created on day i.
    fn chain(n: usize) -> HashMap<String, Node> {
        (0..n)
            .map(|i| {
                let parent = (i > 0).then(|| format!("c{}", i - 1));
                (format!("c{i}"), Node { parent, created_us: i64::try_from(i).unwrap() * DAY })
            })
            .collect()
    }

    #[test]
    fn keeps_young_head_and_k_ancestors_and_reparents() {
        let nodes = chain(20);
        // Cut-off on day 18: c18, c19 young. Head c19; K = 3 → c18 (young), c17, c16.
        let keep = keep_set(&nodes, &["c19".into()], 18 * DAY, 3, |_| true);
        let mut kept: Vec<_> = keep.iter().cloned().collect();
        kept.sort();
        assert_eq!(kept, ["c16", "c17", "c18", "c19"]);
        let p = plan(&nodes, &keep);
        assert_eq!(p.remove.len(), 16);
        // c16's parent c15 is gone and nothing older is kept: it becomes a root.
        assert_eq!(p.reparent, [("c16".to_owned(), None)]);
    }

    #[test]
    fn invalid_ancestors_do_not_count_and_are_skipped_over() {
        let nodes = chain(10);
        let corrupt = ["c7", "c5"];
        let keep = keep_set(&nodes, &["c9".into()], 100 * DAY, 3, |id| !corrupt.contains(&id));
        let mut kept: Vec<_> = keep.iter().cloned().collect();
        kept.sort();
        assert_eq!(kept, ["c4", "c6", "c8", "c9"]);
        let p = plan(&nodes, &keep);
        // c8 → c6 (c7 removed), c6 → c4 (c5 removed), c4 → root.
        assert_eq!(
            p.reparent,
            [
                ("c4".to_owned(), None),
                ("c6".to_owned(), Some("c4".to_owned())),
                ("c8".to_owned(), Some("c6".to_owned()))
            ]
        );
    }

    #[test]
    fn forks_off_the_head_chain_go_once_old_and_young_forks_stay() {
        let mut nodes = chain(6);
        // An old fork from c2 and a young fork from c1 whose parent c1 goes.
        nodes.insert("old-fork".into(), Node { parent: Some("c2".into()), created_us: 2 * DAY + 1 });
        nodes.insert("young-fork".into(), Node { parent: Some("c1".into()), created_us: 50 * DAY });
        let keep = keep_set(&nodes, &["c5".into()], 40 * DAY, 2, |_| true);
        let p = plan(&nodes, &keep);
        assert!(p.remove.contains(&"old-fork".to_owned()) && p.remove.contains(&"c1".to_owned()));
        assert!(!p.remove.contains(&"young-fork".to_owned()));
        // The young fork's ancestors c1, c0 are both gone: it becomes a root.
        assert!(p.reparent.contains(&("young-fork".to_owned(), None)));
        assert!(p.reparent.contains(&("c3".to_owned(), None)));
    }

    #[test]
    fn nothing_old_nothing_removed_and_cycles_end() {
        let nodes = chain(5);
        let keep = keep_set(&nodes, &["c4".into()], 0, 1, |_| true);
        assert_eq!(plan(&nodes, &keep), Plan::default());
        let mut cyclic = chain(3);
        cyclic.get_mut("c0").unwrap().parent = Some("c2".into());
        assert_eq!(ancestors(&cyclic, "c2"), ["c1", "c0"]);
    }

    #[test]
    fn every_head_is_kept_with_its_own_ancestors() {
        let mut nodes = chain(8);
        // A second session resumed from c3: its checkpoints r0 ← r1 start at c3.
        nodes.insert("r0".into(), Node { parent: Some("c3".into()), created_us: 4 * DAY });
        nodes.insert("r1".into(), Node { parent: Some("r0".into()), created_us: 5 * DAY });
        let keep = keep_set(&nodes, &["c7".into(), "r1".into()], 100 * DAY, 2, |_| true);
        for id in ["c7", "c6", "c5", "r1", "r0", "c3"] {
            assert!(keep.contains(id), "{id} kept");
        }
        assert!(!keep.contains("c4"));
    }
}
