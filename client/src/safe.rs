//! What the client takes from the hub or a teammate is data, never a path, a command or a
//! terminal sequence: ids become file names and commands only once they are checked, what
//! is printed for a shell is quoted, and text is printed with its control characters
//! neutralized.

use std::borrow::Cow;

/// An agent's conversation id as one plain path component (`baton_proto::agent`'s rule,
/// which the server stores by; a hostile hub may send anything). Checked before it names a
/// file or goes into a command.
pub fn agent_session_id(id: &str) -> anyhow::Result<&str> {
    if !baton_proto::agent::is_safe_session_id(id) {
        anyhow::bail!(
            "the hub sent an agent session id that is not a plain name ({}); refusing to use it as a file name or in a command",
            line(&crate::text::clip(id, 80))
        );
    }
    Ok(id)
}

/// argv as one line a POSIX shell runs as exactly that argv.
pub fn shell_line(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default()
}

/// A control character made visible: `\n`, `\t`, `\r`, or `\u{1b}` for the rest (ESC, the
/// C1 controls, DEL…), so text cannot move the cursor, recolour, retitle the terminal or
/// write the clipboard (OSC 52).
fn visible(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c => out.extend(c.escape_unicode()),
    }
}

/// Stored text as one line: every control character, newlines included, made visible.
pub fn line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() { visible(c, &mut out) } else { out.push(c) }
    }
    Cow::Owned(out)
}

/// Text of several lines as printed: newlines and tabs kept, every other control character
/// made visible.
pub fn text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' { visible(c, &mut out) } else { out.push(c) }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_one_plain_name() {
        assert!(agent_session_id("0b1e2c3d-0000-7000-8000-000000000001").is_ok());
        for bad in [
            "",
            "../../work/repo/planted",
            "/etc/x",
            "x; echo INJECTED-$(id -u) #",
            ".x",
            "-x",
            "a/b",
            "a\\b",
        ] {
            assert!(agent_session_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commands_are_quoted_and_built_from_safe_ids_only() {
        let argv = baton_proto::agent::resume_argv(baton_proto::v1::AgentKind::ClaudeCode as i32, "abc-1")
            .unwrap_or_default();
        assert_eq!(shell_line(&argv), "claude --resume abc-1");
        assert_eq!(
            baton_proto::agent::resume_argv(
                baton_proto::v1::AgentKind::ClaudeCode as i32,
                "x; echo INJECTED-$(id -u) #"
            ),
            None
        );
        assert_eq!(shell_line(&["echo".into(), "a b;c".into()]), "echo 'a b;c'");
    }

    #[test]
    fn control_characters_are_made_visible() {
        let osc52 = "copy \u{1b}]52;c;ZWNobyBwd25lZA==\u{7}done";
        assert!(!line(osc52).contains('\u{1b}') && !line(osc52).contains('\u{7}'));
        assert_eq!(line("a\nb"), "a\\nb");
        assert_eq!(text("a\nb\u{1b}[2J"), "a\nb\\u{1b}[2J");
        assert_eq!(text("c1 \u{9b}31m"), "c1 \\u{9b}31m");
    }
}
