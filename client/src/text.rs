//! Text as the client prints and stores it: clipped, fitted to a budget, counted, aged.

/// Clips at a char boundary, marking the cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Clips to at most `max` bytes at a char boundary, marking the cut (for fields the hub
/// limits in bytes).
pub fn clip_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Keeps whole lines of `text` within `max` characters.
pub fn fit_lines(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for line in text.lines() {
        let cost = line.chars().count() + 1;
        if used + cost > max {
            break;
        }
        out.push_str(line);
        out.push('\n');
        used += cost;
    }
    out
}

/// "3m"-style age of a duration in µs.
pub fn ago(us: i64) -> String {
    let s = us.max(0) / 1_000_000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `n` with the noun in the number it takes: "1 session", "3 sessions", "0 sessions".
pub fn count<N: std::fmt::Display + TryInto<u64> + Copy>(n: N, one: &str, many: &str) -> String {
    let singular = n.try_into().ok() == Some(1);
    format!("{n} {}", if singular { one } else { many })
}

/// Items for a sentence: `a, b or c`, with `last` (`or`, `and`) before the last one.
pub fn series(items: &[String], last: &str) -> String {
    match items.split_last() {
        Some((end, rest)) if !rest.is_empty() => format!("{} {last} {end}", rest.join(", ")),
        _ => items.concat(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clips_to_bytes_at_a_char_boundary() {
        assert_eq!(super::clip_bytes("short", 10), "short");
        let cut = super::clip_bytes(&"é".repeat(10), 9);
        assert!(cut.len() <= 9 && cut.ends_with('…'), "{cut}");
        assert_eq!(super::clip_bytes(&"a".repeat(4002), 4000).len(), 4000);
    }

    #[test]
    fn series_joins_the_last_with_its_word() {
        let items = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(super::series(&items(&["a", "b", "c"]), "or"), "a, b or c");
        assert_eq!(super::series(&items(&["a", "b"]), "and"), "a and b");
        assert_eq!(super::series(&items(&["a"]), "or"), "a");
        assert_eq!(super::series(&[], "or"), "");
    }
}
