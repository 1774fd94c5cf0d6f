//! The hub's messages are written for API callers (RPC and field names); a CLI user gets
//! them in the CLI's terms: its flags and commands, not RPCs they cannot call.

/// The hub's phrase and what a CLI user types instead.
const CLI_TERMS: [(&str, &str); 6] = [
    ("(end it with EndSession, or wait", "(its agent's conversation ends it, or wait"),
    ("retry with the new base_revision", "run it again with --if-revision set to the new revision"),
    ("; start one with StartSession", "; `baton sessions` lists the project's sessions"),
    ("(REMOVE_ITEM, `baton memory rm`)", "(`baton memory remove CATEGORY TEXT`)"),
    ("raise the cap (SetMemoryCaps)", "raise the cap (`baton memory caps CATEGORY N`)"),
    ("key: notes need a key", "notes need a key (--key NAME)"),
];

/// A message as a CLI user should read it.
pub fn for_cli(message: &str) -> String {
    CLI_TERMS.iter().fold(message.to_owned(), |m, (api, cli)| m.replace(api, cli))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_names_become_commands_and_flags() {
        let hub = "decision holds at most 5 item(s) and has 5; adding 1 would make 6: remove one first \
                   (REMOVE_ITEM, `baton memory rm`) or raise the cap (SetMemoryCaps)";
        let cli = for_cli(hub);
        assert!(
            cli.contains("`baton memory caps CATEGORY N`") && cli.contains("`baton memory remove"),
            "{cli}"
        );
        assert!(!cli.contains("SetMemoryCaps") && !cli.contains("REMOVE_ITEM"), "{cli}");
        let stale = for_cli(
            "write rejected: note:a changed since revision 3 (now revision 4); re-read it, merge, and retry with the new base_revision",
        );
        assert!(stale.ends_with("--if-revision set to the new revision"), "{stale}");
        assert_eq!(
            for_cli("session_id: no session 0190; start one with StartSession"),
            "session_id: no session 0190; `baton sessions` lists the project's sessions"
        );
    }
}
