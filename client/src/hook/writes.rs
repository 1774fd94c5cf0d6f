//! What a tool call is about to write, as far as its input says, for the pre-tool hook's
//! reservation check: the file tools' paths (Claude Code's Edit, Write, MultiEdit,
//! NotebookEdit; Gemini's write_file, replace; Cursor's edit tools), the files of Codex's
//! apply_patch, and the writes a shell command shows in its words (`rm`, `mv`, `cp`, `touch`,
//! `tee`, `sed -i`, `truncate`, `mkdir`, `>`/`>>` redirects, `git checkout|restore -- path`,
//! `git rm|mv`). Conservative: a word it cannot read is passed over, never guessed at.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agents::payload::Payload;

/// The paths a call is about to write, each as given (relative to the call's directory, or
/// absolute), with that directory.
pub fn planned(p: &Payload, cwd: &Path) -> (Vec<String>, PathBuf) {
    let Some(name) = p.tool_name.as_deref() else {
        // Cursor's beforeShellExecution: the command alone.
        return (p.command.as_deref().map(shell).unwrap_or_default(), cwd.to_path_buf());
    };
    let null = Value::Null;
    let input = p.tool_input.as_ref().unwrap_or(&null);
    let field =
        |keys: &[&str]| keys.iter().find_map(|k| input.get(*k).and_then(Value::as_str)).map(str::to_owned);
    match name {
        "Edit" | "Write" | "MultiEdit" | "write_file" | "replace" | "edit_file" | "search_replace"
        | "Delete" | "delete_file" => {
            (field(&["file_path", "path", "target_file"]).into_iter().collect(), cwd.to_path_buf())
        }
        "NotebookEdit" | "edit_notebook" => {
            (field(&["notebook_path", "target_notebook"]).into_iter().collect(), cwd.to_path_buf())
        }
        "apply_patch" => {
            (field(&["command", "input", "patch"]).map(|t| patch(&t)).unwrap_or_default(), cwd.to_path_buf())
        }
        _ => {
            let Some(command) = crate::local::journal::shell_command(name, input)
                .map(str::to_owned)
                .or_else(|| p.command.clone())
            else {
                return (Vec::new(), cwd.to_path_buf());
            };
            let dir =
                field(&["workdir", "dir_path", "cwd"]).map_or_else(|| cwd.to_path_buf(), |d| cwd.join(d));
            (shell(&command), dir)
        }
    }
}

/// The files an apply_patch envelope adds, updates, deletes or moves to.
pub fn patch(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "]
                .iter()
                .find_map(|head| l.strip_prefix(head))
        })
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The paths a shell command's words show it writing.
pub fn shell(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in command.split(['\n', ';', '&', '|']) {
        let Some(words) = shlex::split(part) else { continue };
        let mut words: Vec<String> = words;
        redirects(&mut words, &mut out);
        // `env`, assignments and `sudo` before the command itself.
        let start = words
            .iter()
            .position(|w| {
                (w.starts_with('-') || !w.contains('=')) && !matches!(w.as_str(), "sudo" | "env" | "command")
            })
            .unwrap_or(words.len());
        let words: Vec<&str> = words[start..].iter().map(String::as_str).collect();
        out.extend(command_writes(&words).into_iter().map(str::to_owned));
    }
    out.retain(|p| !p.is_empty() && !p.starts_with("/dev/") && !p.contains('$') && !p.contains('*'));
    out.sort();
    out.dedup();
    out
}

/// Takes `>`/`>>` redirects out of `words`, their targets into `out`.
fn redirects(words: &mut Vec<String>, out: &mut Vec<String>) {
    let mut kept = Vec::with_capacity(words.len());
    let mut next_is_target = false;
    for w in words.drain(..) {
        if next_is_target {
            out.push(w);
            next_is_target = false;
            continue;
        }
        let op = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        if let Some(rest) = op.strip_prefix(">>").or_else(|| op.strip_prefix('>')) {
            let rest = rest.trim_start_matches('|');
            if rest.starts_with('&') {
                continue; // `2>&1`: another descriptor, no file.
            }
            if rest.is_empty() {
                next_is_target = true;
            } else {
                out.push(rest.to_owned());
            }
            continue;
        }
        kept.push(w);
    }
    *words = kept;
}

/// What one simple command writes.
fn command_writes<'a>(words: &[&'a str]) -> Vec<&'a str> {
    let operands = |rest: &[&'a str]| -> Vec<&'a str> {
        let mut after_dashes = false;
        rest.iter()
            .copied()
            .filter(|a| {
                if *a == "--" {
                    after_dashes = true;
                    return false;
                }
                after_dashes || !a.starts_with('-')
            })
            .collect()
    };
    match words {
        ["rm" | "rmdir" | "touch" | "truncate" | "mkdir" | "tee" | "shred" | "unlink", rest @ ..] => {
            // `truncate -s N`, `mkdir -m MODE`: option values are not paths.
            let mut ops = operands(rest);
            if matches!(words[0], "truncate") {
                ops.retain(|o| !o.chars().all(|c| c.is_ascii_digit() || "+-<>/%KMGkmg".contains(c)));
            }
            ops
        }
        ["cp" | "install" | "ln" | "rsync", rest @ ..] => {
            operands(rest).last().copied().into_iter().collect()
        }
        ["sed", rest @ ..] if rest.iter().any(|a| a.starts_with("-i") || *a == "--in-place") => {
            // The script: the value of each -e/-f, else the first operand.
            let mut files = Vec::new();
            let mut scripted = false;
            let mut skip_next = false;
            for a in rest {
                if skip_next {
                    skip_next = false;
                } else if matches!(*a, "-e" | "-f" | "--expression" | "--file") {
                    scripted = true;
                    skip_next = true;
                } else if a.starts_with("--expression=") || a.starts_with("--file=") {
                    scripted = true;
                } else if !a.starts_with('-') {
                    files.push(*a);
                }
            }
            files.into_iter().skip(usize::from(!scripted)).collect()
        }
        ["mv", rest @ ..] | ["git", "rm" | "mv", rest @ ..] => operands(rest),
        ["git", "checkout" | "restore", rest @ ..] => match rest.iter().position(|a| *a == "--") {
            Some(i) => rest[i + 1..].to_vec(),
            None if words[1] == "restore" => operands(rest),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_writes_are_found_in_the_words() {
        let cases: &[(&str, &[&str])] = &[
            ("echo hi > out.txt && ls", &["out.txt"]),
            ("cat a >> 'log dir/b.log' 2>&1", &["log dir/b.log"]),
            ("rm -rf build src/old.rs", &["build", "src/old.rs"]),
            ("mv a.rs b.rs", &["a.rs", "b.rs"]),
            ("cp -r templates/x.rs src/x.rs", &["src/x.rs"]),
            ("sed -i 's/a/b/' src/lib.rs", &["src/lib.rs"]),
            ("sed -i.bak -e 's/a/b/' one two", &["one", "two"]),
            ("touch new.md; git checkout -- src/main.rs", &["new.md", "src/main.rs"]),
            ("FOO=1 sudo tee -a conf.toml", &["conf.toml"]),
            ("git rm -q gone.rs | cat", &["gone.rs"]),
            ("cargo test 2>/dev/null", &[]),
            ("ls -la; cat README.md; git status; git checkout main", &[]),
            ("rm $TMPFILE *.o", &[]),
            ("echo 'unbalanced > x", &[]),
        ];
        for (command, want) in cases {
            assert_eq!(shell(command), want.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(), "{command}");
        }
    }

    #[test]
    fn patches_name_their_files() {
        let text = "*** Begin Patch\n*** Add File: /w/p/hello.txt\n+hi\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n*** Delete File: old.rs\n*** End Patch\n";
        assert_eq!(patch(text), vec!["/w/p/hello.txt", "src/a.rs", "src/b.rs", "old.rs"]);
    }

    #[test]
    fn file_tools_name_their_path() {
        let p: Payload = serde_json::from_value(serde_json::json!({
            "session_id": "s", "tool_name": "Edit", "tool_input": {"file_path": "/r/src/a.rs", "old_string": "x"}
        }))
        .unwrap();
        assert_eq!(planned(&p, Path::new("/r")).0, vec!["/r/src/a.rs"]);
        let p: Payload = serde_json::from_value(serde_json::json!({
            "session_id": "s", "tool_name": "apply_patch", "tool_input": {"command": "*** Begin Patch\n*** Add File: x.txt\n+a\n*** End Patch"}
        }))
        .unwrap();
        assert_eq!(planned(&p, Path::new("/r")).0, vec!["x.txt"]);
        let p: Payload = serde_json::from_value(serde_json::json!({
            "session_id": "s", "tool_name": "Read", "tool_input": {"file_path": "/r/src/a.rs"}
        }))
        .unwrap();
        assert!(planned(&p, Path::new("/r")).0.is_empty());
    }
}
