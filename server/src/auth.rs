//! Who is calling: open while no token exists (the laptop case), else a bearer token
//! checked against the stored sha256, its role and its project scope.
//!
//! Lookups are cached briefly (a revoked token stops working within `TTL`), and
//! `last_used` is written at most once a minute per token, off the request path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

use crate::core::access::{Need, Role, hash_secret};
use crate::error::Error;
use crate::store::{Entity, Store, TokenRow};

/// How long a token lookup (or "no tokens yet") is trusted.
pub const TTL: Duration = Duration::from_secs(2);
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// The caller of a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// No token exists on this hub: everything is allowed (loopback by default).
    Open,
    Token {
        name: String,
        role: Role,
        project: Option<String>,
    },
}

impl Principal {
    /// The token's name, recorded as the actor of writes ("" while open).
    pub fn name(&self) -> &str {
        match self {
            Self::Open => "",
            Self::Token { name, .. } => name,
        }
    }

    pub fn allow(&self, need: Need) -> Result<(), Error> {
        match self {
            Self::Token { name, role, .. } if *role < need.role() => {
                Err(Error::PermissionDenied(match need {
                    Need::Admin => format!(
                        "token {name:?} is a {} token; this needs an admin token (baton-server token create --role admin)",
                        role.as_str()
                    ),
                    _ => format!(
                        "token {name:?} is a {} token and cannot write; ask an admin for a writer token",
                        role.as_str()
                    ),
                }))
            }
            _ => Ok(()),
        }
    }

    pub fn scope(&self, project: &str) -> Result<(), Error> {
        match self {
            Self::Token { name, project: Some(scope), .. } if scope != project => {
                Err(Error::PermissionDenied(format!(
                    "token {name:?} is limited to project {scope:?}, not {project:?}"
                )))
            }
            _ => Ok(()),
        }
    }

    /// For requests over every project: only unscoped tokens.
    pub fn all_projects(&self) -> Result<(), Error> {
        match self {
            Self::Token { name, project: Some(scope), .. } => Err(Error::PermissionDenied(format!(
                "token {name:?} is limited to project {scope:?}: name that project"
            ))),
            _ => Ok(()),
        }
    }

    fn scoped(&self) -> bool {
        matches!(self, Self::Token { project: Some(_), .. })
    }
}

#[derive(Default)]
struct Cache {
    any: Option<(bool, Instant)>,
    tokens: HashMap<String, (Option<TokenRow>, Instant)>,
    touched: HashMap<String, Instant>,
}

#[derive(Clone)]
pub struct Auth<S: Store> {
    store: S,
    cache: Arc<Mutex<Cache>>,
}

fn bearer(metadata: &MetadataMap) -> Option<String> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned()).filter(|t| !t.is_empty())
}

impl<S: Store> Auth<S> {
    pub fn new(store: S) -> Self {
        Self { store, cache: Arc::default() }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn any_tokens(&self) -> Result<bool, Error> {
        if let Some((any, at)) = self.cache().any
            && (any || at.elapsed() < TTL)
        {
            // Once a token exists the hub never goes back to open.
            return Ok(any);
        }
        let any = self.store.any_tokens().await?;
        self.cache().any = Some((any, Instant::now()));
        Ok(any)
    }

    async fn lookup(&self, hash: &str) -> Result<Option<TokenRow>, Error> {
        if let Some((row, at)) = self.cache().tokens.get(hash)
            && at.elapsed() < TTL
        {
            return Ok(row.clone());
        }
        let row = self.store.token_by_hash(hash.to_owned()).await?;
        let mut cache = self.cache();
        if cache.tokens.len() > 10_000 {
            cache.tokens.clear();
        }
        cache.tokens.insert(hash.to_owned(), (row.clone(), Instant::now()));
        Ok(row)
    }

    /// Identifies the caller of a request.
    pub async fn principal(&self, metadata: &MetadataMap) -> Result<Principal, Error> {
        if !self.any_tokens().await? {
            return Ok(Principal::Open);
        }
        let Some(secret) = bearer(metadata) else {
            return Err(Error::Unauthenticated(
                "this hub requires an access token: send `authorization: Bearer <token>` (baton: set BATON_TOKEN or \
                 --token); an admin creates one with `baton-server token create`"
                    .into(),
            ));
        };
        let Some(row) = self.lookup(&hash_secret(&secret)).await? else {
            return Err(Error::Unauthenticated(
                "unknown access token: check BATON_TOKEN, or ask an admin for a new one".into(),
            ));
        };
        if row.revoked_us.is_some() {
            return Err(Error::Unauthenticated(format!(
                "token {:?} was revoked; ask an admin for a new one",
                row.name
            )));
        }
        let role = Role::parse(&row.role)
            .ok_or_else(|| Error::internal(format!("token {} has unknown role {}", row.name, row.role)))?;
        self.touch(&row);
        Ok(Principal::Token { name: row.name, role, project: row.project })
    }

    /// Records use, at most once a minute per token, without delaying the request.
    fn touch(&self, row: &TokenRow) {
        {
            let mut cache = self.cache();
            if cache.touched.get(&row.id).is_some_and(|at| at.elapsed() < TOUCH_EVERY) {
                return;
            }
            cache.touched.insert(row.id.clone(), Instant::now());
        }
        let store = self.store.clone();
        let id = row.id.clone();
        let now = crate::store::rows::us(&prost_types::Timestamp::from(std::time::SystemTime::now()));
        tokio::spawn(async move {
            if let Err(e) = store.touch_token(id, now).await {
                tracing::debug!(error = %e, "could not record token use");
            }
        });
    }

    /// Identifies the caller and checks role and project.
    pub async fn check(&self, metadata: &MetadataMap, need: Need, project: &str) -> Result<Principal, Error> {
        let who = self.principal(metadata).await?;
        who.allow(need)?;
        who.scope(project)?;
        Ok(who)
    }

    /// Like `check`, for requests that name a session or checkpoint instead of a project.
    pub async fn check_entity(
        &self,
        metadata: &MetadataMap,
        need: Need,
        kind: Entity,
        id: &str,
    ) -> Result<Principal, Error> {
        let who = self.principal(metadata).await?;
        who.allow(need)?;
        if who.scoped()
            && let Some(project) = self.store.project_of(kind, id.to_owned()).await?
        {
            who.scope(&project)?;
        }
        Ok(who)
    }
}
