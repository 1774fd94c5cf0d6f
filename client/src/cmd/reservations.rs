//! `baton reserve`, `baton release`, `baton reservations` (and its `settings`): who is
//! working on what, for people and for agents calling the CLI from their shell.

use std::path::Path;
use std::time::Duration;

use baton_proto::v1::{
    ListReservationsRequest, ReleaseRequest, Reservation, ReservationEnforcement, ReservationStatus,
    ReserveRequest, SetReservationSettingsRequest,
};

use crate::hub::remote::{self, Timeouts};
use crate::outbox::write;
use crate::usecase::reservations::{self as r, holder_line, repo_path, target};
use crate::{ctx::Ctx, project, view};

/// What `baton reserve` asks.
pub struct Ask {
    pub paths: Vec<String>,
    pub tasks: Vec<String>,
    pub reason: Option<String>,
    pub branch: Option<String>,
    pub wait: Option<Duration>,
    pub steal: bool,
    pub session: Option<String>,
}

/// The paths given here, repository-relative.
fn paths(root: &Path, dir: &Path, given: &[String]) -> anyhow::Result<Vec<String>> {
    given.iter().map(|p| repo_path(root, dir, p)).collect()
}

pub async fn reserve(ctx: &Ctx, dir: &Path, ask: Ask, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let paths = paths(&project.root, dir, &ask.paths)?;
    if paths.is_empty() && ask.tasks.is_empty() {
        anyhow::bail!("name what to reserve: paths (files or directories), or --task KEY");
    }
    let wait_seconds = ask.wait.map_or(0, |w| u32::try_from(w.as_secs().max(1)).unwrap_or(u32::MAX));
    if wait_seconds > 600 {
        anyhow::bail!("--wait is at most 10m: wait again after a wait runs out");
    }
    // A wait holds the call open: no request timeout but the wait's own.
    let timeouts =
        Timeouts { request: Some(Duration::from_secs(u64::from(wait_seconds) + 30)), ..Timeouts::CLI };
    let mut hub = remote::connect(&ctx.settings, timeouts).await?;
    let session_id = r::session(ctx, &mut hub, &project.key, ask.session.as_deref()).await?;
    let (reason, _) = baton_proto::redact::redact(ask.reason.as_deref().unwrap_or_default());
    let request = ReserveRequest {
        project: project.key.clone(),
        session_id: session_id.clone(),
        paths,
        tasks: ask.tasks,
        branch: ask.branch.unwrap_or_default(),
        reason: reason.into_owned(),
        steal: ask.steal,
        wait_seconds,
        write: write::options(0, &session_id),
    };
    let reply = hub.reservations.reserve(request).await.map_err(remote::fail)?.into_inner();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "granted": reply.granted,
                "reservations": reply.reservations.iter().map(r::json).collect::<Vec<_>>(),
                "blockers": reply.blockers.iter().filter_map(|b| b.reservation.as_ref()).map(r::json).collect::<Vec<_>>(),
                "taken_over": reply.taken_over.iter().map(r::json).collect::<Vec<_>>(),
            })
        );
        if !reply.granted {
            anyhow::bail!("not granted");
        }
        return Ok(());
    }
    if !reply.granted {
        anyhow::bail!(
            "not reserved:\n{}\nwait for it (--wait 5m), ask its holder, or work elsewhere",
            r::blocked_text(&reply.blockers)
        );
    }
    for t in &reply.taken_over {
        println!("took over {} from {}", target(t), holder_line(t));
    }
    let until = reply.reservations.first().map(|x| view::time(x.expires_at.as_ref())).unwrap_or_default();
    let what: Vec<String> = reply.reservations.iter().map(target).collect();
    println!(
        "reserved {} until {until}, renewed while the session's hooks (or baton mcp) run",
        crate::text::series(&what, "and")
    );
    Ok(())
}

/// What `baton release` ends.
pub struct Which {
    pub paths: Vec<String>,
    pub tasks: Vec<String>,
    pub all: bool,
    pub session: Option<String>,
}

pub async fn release(ctx: &Ctx, dir: &Path, which: Which, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let paths = paths(&project.root, dir, &which.paths)?;
    if paths.is_empty() && which.tasks.is_empty() && !which.all {
        anyhow::bail!("name what to release (paths, --task KEY), or --all of the session's");
    }
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let session_id = r::session(ctx, &mut hub, &project.key, which.session.as_deref()).await?;
    let request = ReleaseRequest {
        project: project.key.clone(),
        session_id: session_id.clone(),
        ids: Vec::new(),
        paths,
        tasks: which.tasks,
        write: write::options(0, &session_id),
    };
    let reply = hub.reservations.release(request).await.map_err(remote::fail)?.into_inner();
    if json {
        let rows = |v: &[Reservation]| v.iter().map(r::json).collect::<Vec<_>>();
        println!(
            "{}",
            serde_json::json!({"released": rows(&reply.released), "granted": rows(&reply.granted)})
        );
        return Ok(());
    }
    if reply.released.is_empty() {
        println!("nothing to release: the session holds none of these");
        return Ok(());
    }
    let what: Vec<String> = reply.released.iter().map(target).collect();
    println!("released {}", crate::text::series(&what, "and"));
    for g in &reply.granted {
        println!("{} goes to the first waiter: {}", target(g), holder_line(g));
    }
    Ok(())
}

/// `baton reservations`: what is held and waited for in the project (or overlapping the
/// paths given), held first, then the queue.
pub async fn list(ctx: &Ctx, dir: &Path, given: &[String], mine: bool, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let paths = paths(&project.root, dir, given)?;
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let session_id = if mine { r::session(ctx, &mut hub, &project.key, None).await? } else { String::new() };
    let mut request =
        ListReservationsRequest { project: project.key.clone(), paths, session_id, ..Default::default() };
    let mut found = Vec::new();
    let settings = loop {
        let page =
            hub.reservations.list_reservations(request.clone()).await.map_err(remote::fail)?.into_inner();
        found.extend(page.reservations);
        if page.next_page_token.is_empty() {
            break page.settings.unwrap_or_default();
        }
        request.page_token = page.next_page_token;
    };
    if json {
        let rows: Vec<_> = found.iter().map(r::json).collect();
        println!(
            "{}",
            serde_json::json!({
                "project": project.key,
                "reservations": rows,
                "settings": {
                    "ttl_seconds": settings.ttl_seconds,
                    "enforcement": enforcement_name(settings.enforcement),
                    "auto_reserve": settings.auto_reserve,
                    "max_live": settings.max_live,
                },
            })
        );
        return Ok(());
    }
    let mut t =
        view::table(&["what", "status", "agent", "user", "host", "session", "since", "expires", "reason"]);
    for x in &found {
        let h = x.holder.clone().unwrap_or_default();
        let since = if x.status == ReservationStatus::Held as i32 { &x.granted_at } else { &x.created_at };
        t.add_row(vec![
            target(x),
            r::status(x.status),
            view::agent(h.agent).to_owned(),
            crate::safe::line(&h.user).into_owned(),
            crate::safe::line(&h.host).into_owned(),
            view::short(&x.session_id).to_owned(),
            view::age(since.as_ref()),
            view::time(x.expires_at.as_ref()),
            crate::text::clip(&crate::safe::line(&x.reason), 60),
        ]);
    }
    println!(
        "{}",
        view::rows_or(&t, "no reservations: an agent reserves with baton reserve PATH or its reserve tool")
    );
    println!(
        "time to live {} s, hooks {} edits of others' paths, auto-reservations {}",
        settings.ttl_seconds,
        match ReservationEnforcement::try_from(settings.enforcement).unwrap_or_default() {
            ReservationEnforcement::Deny => "deny",
            ReservationEnforcement::Off => "do not check",
            _ => "warn about",
        },
        if settings.auto_reserve { "on" } else { "off" }
    );
    Ok(())
}

fn enforcement_name(e: i32) -> &'static str {
    match ReservationEnforcement::try_from(e).unwrap_or_default() {
        ReservationEnforcement::Deny => "deny",
        ReservationEnforcement::Off => "off",
        _ => "warn",
    }
}

/// `baton reservations settings`.
pub async fn settings(
    ctx: &Ctx,
    dir: &Path,
    ttl: Option<Duration>,
    enforce: Option<String>,
    auto: Option<bool>,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let enforcement = match enforce.as_deref() {
        None => ReservationEnforcement::Unspecified,
        Some("warn") => ReservationEnforcement::Warn,
        Some("deny") => ReservationEnforcement::Deny,
        Some("off") => ReservationEnforcement::Off,
        Some(other) => anyhow::bail!("--enforce {other:?}: expected warn, deny or off"),
    };
    let ttl_seconds = ttl.map(|t| u32::try_from(t.as_secs()).unwrap_or(u32::MAX));
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let request = SetReservationSettingsRequest {
        project: project.key.clone(),
        ttl_seconds,
        enforcement: enforcement as i32,
        auto_reserve: auto,
        write: write::options(0, ""),
    };
    let s = hub
        .reservations
        .set_reservation_settings(request)
        .await
        .map_err(remote::fail)?
        .into_inner()
        .settings
        .unwrap_or_default();
    if json {
        println!(
            "{}",
            serde_json::json!({"ttl_seconds": s.ttl_seconds, "enforcement": enforcement_name(s.enforcement), "auto_reserve": s.auto_reserve})
        );
    } else {
        println!(
            "project {}: time to live {} s, enforcement {}, auto-reservations {}",
            crate::safe::line(&project.key),
            s.ttl_seconds,
            enforcement_name(s.enforcement),
            if s.auto_reserve { "on" } else { "off" }
        );
    }
    Ok(())
}
