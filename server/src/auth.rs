//! Who is calling: open while no token exists (the laptop case), else a bearer token
//! checked against the stored sha256, its role and its project scope.
//!
//! Lookups are cached briefly (a revoked token stops working within `TTL`), and
//! `last_used` is written at most once a minute per token, off the request path. Rates are
//! counted here, once the caller is known (`limits::rate`): per token, and per client
//! address for lookups and failures.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

use crate::core::access::{Need, Role, hash_secret};
use crate::error::Error;
use crate::limits::rate::{Origin, RateLimits};
use crate::store::{Entity, Store, TokenRow};

/// How long a token lookup is trusted: a revoked token stops working within this, and a
/// watch stream of a revoked token ends within it (and `WATCH_RECHECK`).
pub const TTL: Duration = Duration::from_secs(2);
/// How long "no token exists" is trusted: the first `token create` closes a running hub
/// within this.
pub const OPEN_TTL: Duration = Duration::from_millis(100);
/// How often an open watch stream checks its caller again.
pub const WATCH_RECHECK: Duration = Duration::from_millis(250);
const TOUCH_EVERY: Duration = Duration::from_mins(1);

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

    /// Whether two principals are the same caller with the same reach.
    pub fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Open, Self::Open) => true,
            (
                Self::Token { name: a, role: ra, project: pa },
                Self::Token { name: b, role: rb, project: pb },
            ) => a == b && ra == rb && pa == pb,
            _ => false,
        }
    }

    /// The one project a scoped token is limited to.
    pub fn scope_project(&self) -> Option<&str> {
        match self {
            Self::Token { project: Some(scope), .. } => Some(scope),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Cache {
    any: Option<(bool, Instant)>,
    tokens: HashMap<String, (Option<TokenRow>, Instant)>,
    touched: HashMap<String, Instant>,
}

/// What a request says about its caller: its bearer secret (or, from the web view, the hash
/// of the token its browser signed in with) and where it comes from. Kept by a watch stream
/// to check its caller again while it runs.
#[derive(Debug, Clone)]
pub struct Caller {
    credential: Option<Credential>,
    origin: Origin,
    /// Already counted against its token's rate (a web page, counted once for all the calls
    /// it makes).
    counted: bool,
}

#[derive(Debug, Clone)]
enum Credential {
    Secret(String),
    Hash(String),
}

impl Caller {
    /// The caller of a request: the one the web view attached to it (an extension only code in
    /// this process can set), else its bearer secret.
    pub fn of<T>(request: &tonic::Request<T>) -> Self {
        if let Some(caller) = request.extensions().get::<Self>() {
            return caller.clone();
        }
        Self {
            credential: bearer(request.metadata()).map(Credential::Secret),
            origin: Origin::of(request.remote_addr().map(|a| a.ip())),
            counted: false,
        }
    }

    /// A caller presenting a token's secret (the web view's sign-in).
    pub fn with_secret(secret: String, origin: Origin) -> Self {
        Self { credential: Some(Credential::Secret(secret)), origin, counted: false }
    }

    /// A caller signed in to the web view with the token of that hash (`None`: none, on an
    /// open hub), whose page was counted against the token's rate as one request
    /// (`Auth::count`).
    pub fn signed_in(token_hash: Option<String>, origin: Origin) -> Self {
        Self { credential: token_hash.map(Credential::Hash), origin, counted: true }
    }

    /// Where it comes from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The hash of its token's secret, as the token table keeps it.
    pub fn token_hash(&self) -> Option<String> {
        match &self.credential {
            Some(Credential::Secret(secret)) => Some(hash_secret(secret)),
            Some(Credential::Hash(hash)) => Some(hash.clone()),
            None => None,
        }
    }
}

#[derive(Clone)]
pub struct Auth<S: Store> {
    store: S,
    cache: Arc<Mutex<Cache>>,
    limits: Arc<RateLimits>,
}

/// The secret of an `authorization: Bearer <secret>` header (any case of "bearer", any
/// spacing around the secret).
fn bearer(metadata: &MetadataMap) -> Option<String> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(|c: char| c.is_ascii_whitespace())?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned()).filter(|t| !t.is_empty())
}

fn unauthenticated(message: &str) -> Error {
    Error::Unauthenticated(message.to_owned())
}

impl<S: Store> Auth<S> {
    pub fn new(store: S, limits: Arc<RateLimits>) -> Self {
        Self { store, cache: Arc::default(), limits }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the hub is closed. A closed hub never looks again (a hub never reopens);
    /// an open one looks at most every `OPEN_TTL`, one request at a time (the others go on
    /// with what was last read meanwhile).
    async fn any_tokens(&self) -> Result<bool, Error> {
        {
            let mut cache = self.cache();
            match cache.any {
                Some((true, _)) => return Ok(true),
                Some((false, at)) if at.elapsed() < OPEN_TTL => return Ok(false),
                Some((false, _)) => cache.any = Some((false, Instant::now())),
                None => {}
            }
        }
        let any = crate::store::any_tokens(&self.store).await?;
        let mut cache = self.cache();
        if !matches!(cache.any, Some((true, _))) {
            cache.any = Some((any, Instant::now()));
        }
        Ok(any)
    }

    /// A token looked up less than `TTL` ago (`Some(None)`: known not to exist).
    #[allow(clippy::option_option, reason = "a cached answer that the token does not exist is an answer")]
    fn cached(&self, hash: &str) -> Option<Option<TokenRow>> {
        let cache = self.cache();
        let (row, at) = cache.tokens.get(hash)?;
        (at.elapsed() < TTL).then(|| row.clone())
    }

    async fn lookup(&self, hash: &str) -> Result<Option<TokenRow>, Error> {
        let row = self.store.tokens(crate::store::model::TokenKey::SecretHash(hash.to_owned())).await?.pop();
        let mut cache = self.cache();
        if cache.tokens.len() > 10_000 {
            cache.tokens.retain(|_, (_, at)| at.elapsed() < TTL);
            if cache.tokens.len() > 10_000 {
                cache.tokens.clear();
            }
        }
        cache.tokens.insert(hash.to_owned(), (row.clone(), Instant::now()));
        Ok(row)
    }

    /// Identifies the caller of a request, and counts it against its token's rate.
    pub async fn principal<T>(&self, request: &tonic::Request<T>) -> Result<Principal, Error> {
        let caller = Caller::of(request);
        let (who, token_id) = self.identify(&caller, true).await?;
        if !caller.counted {
            self.count(&who, token_id.as_deref())?;
        }
        Ok(who)
    }

    /// Counts one request against a token's rate.
    pub fn count(&self, who: &Principal, token_id: Option<&str>) -> Result<(), Error> {
        match (who, token_id) {
            (Principal::Token { name, .. }, Some(id)) => self.limits.token(id, name),
            _ => Ok(()),
        }
    }

    /// Identifies a caller, without counting a request against its token's rate. With
    /// `charge` (a new request), a failure counts against the caller's address, and an
    /// address over its failure limit is refused before any lookup (a valid token seen in
    /// the last `TTL` still passes). Without it (a stream checking its caller again), the
    /// answer is only what the caller is now.
    pub async fn identify(
        &self,
        caller: &Caller,
        charge: bool,
    ) -> Result<(Principal, Option<String>), Error> {
        if !self.any_tokens().await? {
            return Ok((Principal::Open, None));
        }
        let failed = |error: Error| -> Error {
            match charge.then(|| self.limits.failed(caller.origin)) {
                Some(Err(limited)) => limited,
                _ => error,
            }
        };
        let Some(hash) = caller.token_hash() else {
            return Err(failed(unauthenticated(
                "this hub requires an access token: send `authorization: Bearer <token>` (baton: set BATON_TOKEN or \
                 --token); an admin creates one with `baton-server token create`",
            )));
        };
        let row = if let Some(row) = self.cached(&hash) {
            row
        } else {
            if charge {
                self.limits.blocked(caller.origin)?;
            }
            self.lookup(&hash).await?
        };
        let Some(row) = row else {
            return Err(failed(unauthenticated(
                "unknown access token: check BATON_TOKEN, or ask an admin for a new one",
            )));
        };
        if row.revoked_us.is_some() {
            return Err(failed(Error::Unauthenticated(format!(
                "token {:?} was revoked; ask an admin for a new one",
                row.name
            ))));
        }
        let role = Role::parse(&row.role)
            .ok_or_else(|| Error::internal(format!("token {} has unknown role {}", row.name, row.role)))?;
        self.touch(&row);
        let id = row.id.clone();
        Ok((Principal::Token { name: row.name, role, project: row.project }, Some(id)))
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
            if let Err(e) = store.write_token(crate::store::model::TokenWrite::Used { id, now_us: now }).await
            {
                tracing::debug!(error = %e, "could not record token use");
            }
        });
    }

    /// Identifies the caller and checks role and project.
    pub async fn check<T>(
        &self,
        request: &tonic::Request<T>,
        need: Need,
        project: &str,
    ) -> Result<Principal, Error> {
        let who = self.principal(request).await?;
        who.allow(need)?;
        who.scope(project)?;
        Ok(who)
    }

    /// Like `check`, for requests that name a session or checkpoint instead of a project.
    /// The id is parsed (any spelling a uuid parser accepts) and canonical before anything
    /// is looked up by it; a scoped token gets NOT_FOUND for an id it cannot resolve (never
    /// a pass), and the store is given the project the request is authorized for, so that
    /// its own queries by that id stay inside it.
    pub async fn check_entity<T>(
        &self,
        request: &tonic::Request<T>,
        need: Need,
        kind: Entity,
        field: &str,
        raw_id: &str,
    ) -> Result<Authorized, Error> {
        let who = self.principal(request).await?;
        who.allow(need)?;
        let id = crate::core::validate::uuid(field, raw_id)?;
        let within = who.scope_project().map(str::to_owned);
        if within.is_some() {
            match self.store.project_of(kind, id.to_string()).await? {
                Some(project) => who.scope(&project)?,
                None => return Err(Error::NotFound(format!("{field}: no {} {id}", kind.noun()))),
            }
        }
        Ok(Authorized { who, id, within })
    }
}

/// A request by id that passed `Auth::check_entity`.
#[derive(Debug)]
pub struct Authorized {
    pub who: Principal,
    /// The id, canonical.
    pub id: uuid::Uuid,
    /// The project a scoped token is limited to (`None`: any project).
    pub within: Option<String>,
}
