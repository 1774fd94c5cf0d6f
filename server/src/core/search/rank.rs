//! The order of hits, the same on both backends: the engine gives the newest matches with
//! its score (`RANKED` of them), and here a session's matching checkpoints become one hit —
//! its newest, with how many matched — and hits are ordered best first (newest first
//! among equals).

use std::collections::HashMap;

use super::doc::Kind;

/// A match as the engine gives it (SQLite: a JSON array of these fields, in order).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct Candidate {
    pub id: i64,
    pub kind: i64,
    pub session_id: String,
    pub created_us: i64,
    /// Higher is better.
    pub score: f64,
}

/// The bound later pages of a search keep: the newest candidate of the first (0 when it
/// found none). Any document written after the first page is newer, so later pages see the
/// first page's candidates and no others; and the bound comes from the caller's project's
/// documents only (a bound read from every project's told when other projects wrote).
pub fn newest_candidate(candidates: &[Candidate]) -> i64 {
    candidates.iter().map(|c| c.id).max().unwrap_or(0)
}

/// A hit: the document shown, its score, and how many documents of its group matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub id: i64,
    pub score: f64,
    pub matched: i64,
}

/// The hits of a query's candidates, best first.
pub fn collapse(candidates: Vec<Candidate>) -> Vec<Ranked> {
    let newer = |a: &Candidate, b: &Candidate| (a.created_us, a.id) > (b.created_us, b.id);
    let mut out: Vec<(Candidate, i64)> = Vec::new();
    let mut sessions: HashMap<String, usize> = HashMap::new();
    for c in candidates {
        if c.kind != Kind::Checkpoint as i64 || c.session_id.is_empty() {
            out.push((c, 1));
            continue;
        }
        if let Some(&at) = sessions.get(&c.session_id) {
            let (shown, matched) = &mut out[at];
            *matched += 1;
            if newer(&c, shown) {
                *shown = c;
            }
        } else {
            sessions.insert(c.session_id.clone(), out.len());
            out.push((c, 1));
        }
    }
    out.sort_by(|(a, _), (b, _)| {
        b.score.total_cmp(&a.score).then(b.created_us.cmp(&a.created_us)).then(b.id.cmp(&a.id))
    });
    out.into_iter().map(|(c, matched)| Ranked { id: c.id, score: c.score, matched }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64, kind: Kind, session: &str, created_us: i64, score: f64) -> Candidate {
        Candidate { id, kind: kind as i64, session_id: session.into(), created_us, score }
    }

    #[test]
    fn a_sessions_checkpoints_are_one_hit_its_newest() {
        let ranked = collapse(vec![
            c(1, Kind::Checkpoint, "s", 10, 5.0),
            c(2, Kind::Checkpoint, "s", 30, 1.0),
            c(3, Kind::Memory, "s", 20, 2.0),
            c(4, Kind::Checkpoint, "t", 5, 3.0),
            c(5, Kind::Checkpoint, "s", 20, 9.0),
        ]);
        let got: Vec<(i64, i64)> = ranked.iter().map(|r| (r.id, r.matched)).collect();
        // s: its newest (2) with the newest's score; t alone; the memory entry alone.
        assert_eq!(got, [(4, 1), (3, 1), (2, 3)]);
    }

    #[test]
    fn equal_scores_put_the_newest_first() {
        let ranked = collapse(vec![c(1, Kind::Memory, "", 1, 1.0), c(2, Kind::Memory, "", 2, 1.0)]);
        assert_eq!(ranked.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 1]);
    }
}
