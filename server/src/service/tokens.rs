//! Access tokens: created with a name that stays taken after revocation (the audit trail
//! names who did what), stored by the hash of their secret only.

use crate::error::{Error, Result};
use crate::store::model::{TokenKey, TokenWrite};
use crate::store::{Store, TokenRow};

/// Creates a token; ALREADY_EXISTS if one of that name was ever created.
pub async fn create<S: Store>(
    store: &S,
    name: String,
    role: String,
    project: Option<String>,
    secret_hash: String,
) -> Result<TokenRow> {
    if !store.tokens(TokenKey::Name(name.clone())).await?.is_empty() {
        return Err(Error::AlreadyExists(format!(
            "a token named {name:?} already exists (names stay taken after revocation, for the audit trail); pick \
             another name"
        )));
    }
    let token = TokenRow {
        id: uuid::Uuid::now_v7().to_string(),
        name,
        role,
        project,
        created_us: crate::core::time::now_us(),
        last_used_us: None,
        revoked_us: None,
    };
    store.write_token(TokenWrite::Create { token: token.clone(), secret_hash }).await?;
    Ok(token)
}
