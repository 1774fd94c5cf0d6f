//! Commands worth a checkpoint before they run: the ones that destroy work or data.

/// Why a command is risky, if it is.
pub fn risky(command: &str) -> Option<&'static str> {
    let c = command.to_ascii_lowercase();
    let words: Vec<&str> = c
        .split(|ch: char| ch.is_whitespace() || ch == ';' || ch == '&' || ch == '|')
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let git = has("git");
    if git && has("push") && (has("--force") || has("-f") || has("--force-with-lease") || c.contains(" +")) {
        return Some("force push");
    }
    if git && has("reset") && has("--hard") {
        return Some("hard reset");
    }
    if git && has("clean") && words.iter().any(|w| w.starts_with('-') && w.contains('f')) {
        return Some("git clean");
    }
    if git && (has("checkout") || has("restore")) && (has(".") || has("--")) && !has("-b") {
        return Some("discarding changes");
    }
    if has("rm")
        && words
            .iter()
            .any(|w| w.starts_with('-') && !w.starts_with("--") && (w.contains('r') || w.contains('R')))
    {
        return Some("recursive delete");
    }
    if has("rm") && (has("--recursive") || has("-rf") || has("-fr")) {
        return Some("recursive delete");
    }
    if c.contains("drop table")
        || c.contains("drop database")
        || c.contains("drop schema")
        || c.contains("truncate table")
    {
        return Some("dropping data");
    }
    if c.contains("migrate")
        || c.contains("migration")
        || c.contains("alembic upgrade")
        || c.contains("db:migrate")
    {
        return Some("migration");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_destructive_commands() {
        for (cmd, why) in [
            ("git push --force origin main", "force push"),
            ("git push -f", "force push"),
            ("git reset --hard HEAD~3", "hard reset"),
            ("rm -rf target", "recursive delete"),
            ("rm -r -f build", "recursive delete"),
            ("psql -c 'DROP TABLE users'", "dropping data"),
            ("cargo sqlx migrate run", "migration"),
            ("bin/rails db:migrate", "migration"),
            ("git clean -fdx", "git clean"),
            ("git checkout -- .", "discarding changes"),
        ] {
            assert_eq!(risky(cmd), Some(why), "{cmd}");
        }
    }

    #[test]
    fn leaves_ordinary_commands() {
        for cmd in [
            "git push",
            "git status",
            "rm file.txt",
            "cargo test",
            "ls -la",
            "git checkout -b feature",
            "grep -r foo .",
        ] {
            assert_eq!(risky(cmd), None, "{cmd}");
        }
    }
}
