//! Secret redaction for every structured text field, before anything is stored.
//!
//! Patterns cover the secrets agents most often paste or echo: cloud keys, GitHub,
//! OpenAI, Anthropic and Slack tokens, private key blocks and `password=`-style
//! assignments. Opaque checkpoint payloads are stored as given (documented).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

struct Pattern {
    name: &'static str,
    regex: Regex,
    /// For assignments, the capture group holding the value (the name is kept).
    value_group: Option<usize>,
}

static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let p = |name, re: &str, value_group| Pattern {
        name,
        // The patterns are constants checked by the tests below.
        #[allow(clippy::expect_used)]
        regex: Regex::new(re).expect("valid redaction pattern"),
        value_group,
    };
    vec![
        p(
            "private_key",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            None,
        ),
        p("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", None),
        p("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", None),
        p("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", None),
        p("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
        p("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", None),
        p("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", None),
        p("stripe_key", r"\b[rs]k_live_[A-Za-z0-9]{20,}", None),
        p("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", None),
        p(
            "assignment",
            r#"(?i)\b((?:[a-z0-9_]*_)?(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|token|client[_-]?secret))(\s*[:=]\s*["']?)([^\s"'`,;]{4,})"#,
            Some(3),
        ),
        p("url_credentials", r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]+:)([^\s@/]{3,})(@)", Some(2)),
    ]
});

/// Redacts known secrets from `text`, returning the new text and how many were found.
pub fn redact(text: &str) -> (Cow<'_, str>, u32) {
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    let mut count = 0u32;
    for pattern in PATTERNS.iter() {
        if !pattern.regex.is_match(&out) {
            continue;
        }
        let replaced = pattern
            .regex
            .replace_all(&out, |caps: &regex::Captures<'_>| {
                count += 1;
                let marker = format!("[REDACTED:{}]", pattern.name);
                match pattern.value_group {
                    None => marker,
                    Some(group) => {
                        let mut kept = String::new();
                        for i in 1..group {
                            kept.push_str(caps.get(i).map_or("", |m| m.as_str()));
                        }
                        kept.push_str(&marker);
                        for i in group + 1..caps.len() {
                            kept.push_str(caps.get(i).map_or("", |m| m.as_str()));
                        }
                        kept
                    }
                }
            })
            .into_owned();
        out = Cow::Owned(replaced);
    }
    (out, count)
}

/// Counts redactions over many fields of one request.
#[derive(Debug, Default)]
pub struct Redactor {
    pub count: u32,
}

impl Redactor {
    /// Redacts a field in place.
    pub fn field(&mut self, text: &mut String) {
        let (new, n) = redact(text);
        if n > 0 {
            *text = new.into_owned();
            self.count += n;
        }
    }

    pub fn fields<'a>(&mut self, texts: impl IntoIterator<Item = &'a mut String>) {
        for t in texts {
            self.field(t);
        }
    }
}

/// Every free-text field of a checkpoint's state, for redaction.
pub fn state_texts(state: &mut crate::v1::CheckpointState) -> impl Iterator<Item = &mut String> {
    let crate::v1::CheckpointState {
        active_tasks,
        open_questions,
        blockers,
        recent_changes,
        decisions,
        files_created,
        files_modified,
        files_deleted,
        tool_history,
        errors,
        phase,
        goal,
        summary,
        last_prompt,
        last_answer,
        ..
    } = state;
    active_tasks
        .iter_mut()
        .map(|t| &mut t.content)
        .chain(open_questions.iter_mut())
        .chain(blockers.iter_mut())
        .chain(recent_changes.iter_mut())
        .chain(decisions.iter_mut().flat_map(|d| [&mut d.decision, &mut d.rationale, &mut d.impact]))
        .chain(files_created.iter_mut())
        .chain(files_modified.iter_mut())
        .chain(files_deleted.iter_mut())
        .chain(tool_history.iter_mut().flat_map(|t| [&mut t.name, &mut t.summary]))
        .chain(errors.iter_mut())
        .chain([phase, goal, summary, last_prompt, last_answer])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_known_tokens() {
        let cases = [
            "key AKIAIOSFODNN7EXAMPLE here",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
            "xoxb-123456789012-abcdefghij",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        ];
        for case in cases {
            let (out, n) = redact(case);
            assert_eq!(n, 1, "{case}: {out}");
            assert!(out.contains("[REDACTED:"), "{out}");
        }
    }

    #[test]
    fn keeps_assignment_names() {
        let (out, n) = redact("export DB_PASSWORD=hunter2hunter and api_key: 'abcd1234'");
        assert_eq!(n, 2);
        assert_eq!(out, "export DB_PASSWORD=[REDACTED:assignment] and api_key: '[REDACTED:assignment]'");
        let (out, n) = redact("postgres://baton:s3cretpw@db:5432/baton");
        assert_eq!(n, 1);
        assert_eq!(out, "postgres://baton:[REDACTED:url_credentials]@db:5432/baton");
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for text in ["Use JWT for auth", "the token count is 12", "password reset flow", "sk-short"] {
            let (out, n) = redact(text);
            assert_eq!(n, 0, "{text}");
            assert_eq!(out, text);
        }
    }
}
