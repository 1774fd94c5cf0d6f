//! `baton status`: the hub, the project, and the offline queue with its dead letters.

use std::path::Path;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, outbox::queue, project};

pub async fn run(ctx: &Ctx, dir: &Path, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    // The hub's state, and why when it is not serving (said once: on stderr as the error).
    let (hub, why) = match remote::connect(&ctx.settings, Timeouts::PROBE).await {
        Ok(hub) => {
            let serving = HealthClient::new(hub.channel.clone())
                .check(HealthCheckRequest { service: "baton.v1.SessionService".into() })
                .await
                .map(|r| {
                    r.into_inner().status
                        == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
                });
            match serving {
                Ok(true) => ("serving", None),
                Ok(false) => ("not serving", None),
                Err(s) => ("unhealthy", Some(remote::explain(&s))),
            }
        }
        Err(e) => ("unreachable", Some(e.to_string())),
    };
    let locked = ctx.queue.lock(Some(std::time::Duration::from_secs(2)))?;
    let (pending, dead) = match &locked {
        Some(l) => (l.pending()?, l.dead()?),
        None => (vec![], vec![]),
    };
    drop(locked);
    let oldest = pending.first().map(|(_, e)| crate::text::ago(crate::clock::now_us() - e.written_at_us));
    if json {
        let dead_json: Vec<_> = dead.iter().map(|(_, e)| serde_json::json!({"rpc": e.rpc, "project": e.project, "request_id": e.request_id, "error": e.error})).collect();
        println!(
            "{}",
            serde_json::json!({
                "server": ctx.settings.server, "hub": why.as_ref().map_or_else(|| hub.to_owned(), |w| format!("{hub}: {w}")), "project": project.key,
                "queue": {"pending": pending.len(), "oldest_age": oldest, "dead": dead_json,
                          "caps": {"entries": queue::MAX_ENTRIES, "bytes": queue::MAX_BYTES, "age_days": queue::MAX_AGE.as_secs() / 86_400}},
            })
        );
    } else {
        println!("hub      {} ({hub})", ctx.settings.server);
        println!("project  {}", project.key);
        println!(
            "queue    {} pending{}",
            pending.len(),
            oldest.map(|a| format!(", oldest {a} old")).unwrap_or_default()
        );
        if pending.len() * 10 >= queue::MAX_ENTRIES * 8 {
            println!(
                "         warning: the queue is near its cap of {} entries; run `baton sync`",
                queue::MAX_ENTRIES
            );
        }
        println!("dead     {} refused by the hub", dead.len());
        for (_, e) in &dead {
            let line = format!(
                "  - {} {} ({}): {}",
                e.rpc,
                e.project,
                e.request_id,
                crate::cmd::words::for_cli(e.error.as_deref().unwrap_or("?"))
            );
            println!("{}", crate::safe::line(&line));
        }
    }
    if hub != "serving" && !json {
        anyhow::bail!("{}", why.unwrap_or_else(|| format!("the hub is {hub}")));
    }
    Ok(())
}
