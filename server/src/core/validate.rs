//! Request validation: every rule names the field and the limit, so a client knows what to
//! fix. Pure functions; the API layer maps their errors to INVALID_ARGUMENT.

use uuid::Uuid;

/// Field size limits, in bytes of UTF-8.
pub mod limits {
    pub const PROJECT: usize = 512;
    pub const SHORT: usize = 512; // host, user, branch, agent ids, git commits, keys…
    pub const PATH: usize = 4096;
    pub const TEXT: usize = 16 * 1024; // goal, summary, reason, memory content
    pub const ITEMS: usize = 1000; // list fields in a checkpoint state
    pub const METADATA_ENTRIES: usize = 64;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {message}")]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid { field: field.into(), message: message.into() }
}

/// A non-empty string of at most `max` bytes without control characters.
pub fn required(field: &str, value: &str, max: usize) -> Result<(), Invalid> {
    if value.trim().is_empty() {
        return Err(invalid(field, "is required and must not be blank"));
    }
    optional(field, value, max)
}

/// A string of at most `max` bytes, without NUL (which Postgres cannot store in text, so
/// that both backends refuse it alike).
pub fn optional(field: &str, value: &str, max: usize) -> Result<(), Invalid> {
    if value.len() > max {
        return Err(invalid(field, format!("is {} bytes; the limit is {max}", value.len())));
    }
    if value.contains('\0') {
        return Err(invalid(field, "must not contain NUL bytes (\\0); remove them and retry"));
    }
    Ok(())
}

/// An agent's own session (conversation) id: empty, or up to 128 of `A-Z a-z 0-9 . _ -`
/// starting with a letter or digit. Clients name files and print commands with it (a
/// transcript restored as `<id>.jsonl`, `claude --resume <id>`), so nothing else is stored.
pub fn agent_session_id(field: &str, value: &str) -> Result<(), Invalid> {
    if !value.is_empty() && !baton_proto::agent::is_safe_session_id(value) {
        return Err(invalid(
            field,
            "must be at most 128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit \
             (the agent's own conversation id, e.g. a uuid)",
        ));
    }
    Ok(())
}

/// Single-line identifiers: no control characters.
pub fn single_line(field: &str, value: &str, max: usize) -> Result<(), Invalid> {
    optional(field, value, max)?;
    if value.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters (newlines, tabs…)"));
    }
    Ok(())
}

/// A project key: non-empty, single line.
pub fn project(field: &str, value: &str) -> Result<(), Invalid> {
    required(field, value, limits::PROJECT)?;
    single_line(field, value, limits::PROJECT)
}

/// Parses a required uuid.
pub fn uuid(field: &str, value: &str) -> Result<Uuid, Invalid> {
    if value.is_empty() {
        return Err(invalid(field, "is required (a uuid)"));
    }
    Uuid::parse_str(value).map_err(|_| invalid(field, format!("{value:?} is not a valid uuid")))
}

/// A client-made id: empty means "make one"; else it must be a uuid v7 (time-ordered, so
/// ids sort by creation).
pub fn new_id(field: &str, value: &str) -> Result<Uuid, Invalid> {
    if value.is_empty() {
        return Ok(Uuid::now_v7());
    }
    let id = uuid(field, value)?;
    if id.get_version_num() != 7 {
        return Err(invalid(
            field,
            format!("{value} is a uuid v{}; client-made ids must be uuid v7", id.get_version_num()),
        ));
    }
    Ok(id)
}

/// An enum value sent as i32: known, and not UNSPECIFIED unless allowed.
pub fn enum_value<E: TryFrom<i32>>(field: &str, value: i32, allow_unspecified: bool) -> Result<E, Invalid> {
    if value == 0 && !allow_unspecified {
        return Err(invalid(field, "is required"));
    }
    E::try_from(value).map_err(|_| invalid(field, format!("{value} is not a known value")))
}

/// A count within bounds.
pub fn count(field: &str, value: usize, max: usize) -> Result<(), Invalid> {
    if value > max {
        return Err(invalid(field, format!("has {value} items; the limit is {max}")));
    }
    Ok(())
}

/// A page size: 0 means the default.
pub fn page_size(field: &str, value: i32, default: i64, max: i64) -> Result<i64, Invalid> {
    match i64::from(value) {
        0 => Ok(default),
        v if v < 0 || v > max => Err(invalid(field, format!("{value} is outside 1..={max}"))),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_field_and_limit() {
        let err = required("goal", &"x".repeat(20), 10).unwrap_err();
        assert_eq!(err.to_string(), "goal: is 20 bytes; the limit is 10");
        assert!(required("project", "  ", 10).is_err());
        assert!(single_line("host", "a\nb", 10).is_err());
    }

    #[test]
    fn ids() {
        assert!(uuid("session_id", "nope").unwrap_err().to_string().contains("session_id"));
        assert_eq!(new_id("id", "").unwrap().get_version_num(), 7);
        let v4 = Uuid::new_v4().to_string();
        assert!(new_id("id", &v4).unwrap_err().to_string().contains("uuid v7"));
    }

    #[test]
    fn agent_session_ids_are_one_safe_name() {
        for good in ["", "0b1e2c3d-0000-7000-8000-000000000001", "agent-conv-1", "g_1.2"] {
            assert_eq!(agent_session_id("agent_session_id", good), Ok(()), "{good}");
        }
        for bad in [
            "../../work/repo/planted",
            "/etc/passwd",
            "x; echo INJECTED-$(id -u) #",
            ".hidden",
            "-rf",
            "a b",
            "a/b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(agent_session_id("agent_session_id", bad).is_err(), "{bad}");
        }
        assert!(optional("goal", "a\0b", 10).unwrap_err().message.contains("NUL"));
    }

    #[test]
    fn enums_and_pages() {
        use baton_proto::v1::SessionStatus;
        assert!(enum_value::<SessionStatus>("status", 99, true).is_err());
        assert!(enum_value::<SessionStatus>("status", 0, false).is_err());
        assert_eq!(enum_value::<SessionStatus>("status", 2, false), Ok(SessionStatus::Active));
        assert_eq!(page_size("page_size", 0, 100, 1000), Ok(100));
        assert!(page_size("page_size", 1001, 100, 1000).is_err());
    }
}
