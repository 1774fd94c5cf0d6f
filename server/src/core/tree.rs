//! A session's checkpoints as the tree they form: the order lists show it in.

use std::collections::{HashMap, HashSet};

/// Depth-first from the roots, children oldest first, of nodes `(id, parent)` in creation
/// order: their indices, each with its depth. A parent outside the list (pruned) makes its
/// child a root.
pub fn order<'a>(nodes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Vec<(usize, i32)> {
    let nodes: Vec<(&str, Option<&str>)> = nodes.into_iter().collect();
    let ids: HashSet<&str> = nodes.iter().map(|(id, _)| *id).collect();
    let mut children: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    for (i, (_, parent)) in nodes.iter().enumerate() {
        let parent = parent.filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(i);
    }
    let mut out = Vec::with_capacity(nodes.len());
    let mut stack: Vec<(usize, i32)> =
        children.get(&None).map(|roots| roots.iter().rev().map(|r| (*r, 0)).collect()).unwrap_or_default();
    while let Some((i, depth)) = stack.pop() {
        out.push((i, depth));
        if let Some(kids) = children.get(&Some(nodes[i].0)) {
            stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_first_children_oldest_first() {
        // a ← b ← d, a ← c; e is a second root; f's parent was pruned.
        let nodes = [
            ("a", None),
            ("b", Some("a")),
            ("c", Some("a")),
            ("d", Some("b")),
            ("e", None),
            ("f", Some("x")),
        ];
        let order = order(nodes);
        let named: Vec<(&str, i32)> = order.iter().map(|(i, depth)| (nodes[*i].0, *depth)).collect();
        assert_eq!(named, [("a", 0), ("b", 1), ("d", 2), ("c", 1), ("e", 0), ("f", 0)]);
    }

    #[test]
    fn an_empty_tree_has_no_order() {
        assert!(order([]).is_empty());
    }
}
