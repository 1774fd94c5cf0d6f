//! Access rules: roles, project scope, token secrets. Pure: the store keeps tokens, the
//! auth layer applies these rules to each request.

use sha2::{Digest, Sha256};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Reads only.
    Reader,
    /// Reads and writes sessions, checkpoints, memory.
    Writer,
    /// Everything, including administration.
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reader" => Some(Self::Reader),
            "writer" => Some(Self::Writer),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reader => "reader",
            Self::Writer => "writer",
            Self::Admin => "admin",
        }
    }
}

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    /// Maintenance: retention, compaction, purge.
    Admin,
}

impl Need {
    pub fn role(self) -> Role {
        match self {
            Self::Read => Role::Reader,
            Self::Write => Role::Writer,
            Self::Admin => Role::Admin,
        }
    }
}

/// Prefix of every secret, so leaked ones are easy to recognise (and redact).
pub const SECRET_PREFIX: &str = "baton_";

/// A new random secret (256 bits from the OS RNG, via uuid v4).
pub fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// What is stored for a secret.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_order_and_parse() {
        assert!(Role::Admin > Role::Writer && Role::Writer > Role::Reader);
        assert_eq!(Role::parse("writer"), Some(Role::Writer));
        assert_eq!(Role::parse("root"), None);
        assert!(Need::Write.role() > Role::Reader);
    }

    #[test]
    fn secrets_are_unique_and_hashed() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 64);
        assert_eq!(hash_secret(&a).len(), 64);
        assert_ne!(hash_secret(&a), hash_secret(&b));
    }
}
