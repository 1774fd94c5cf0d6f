//! The command-line subcommands that work on the database directly (tokens, retention,
//! compaction) and the health check.

use anyhow::Context;
use baton_proto::v1::{Actor, ProjectPruned};

use crate::auth;
use crate::config::{self, Config, ServerCommand};
use crate::core;
use crate::events::Wakers;
use crate::jobs::retention::{self, Policy};
use crate::store::{Backend, PgStore, SqliteStore, Store};

/// Runs a `baton-server token|prune|compact …` command against the database.
pub async fn database_command(config: &Config, command: &ServerCommand) -> anyhow::Result<()> {
    let url = config.resolved_database_url()?;
    let wakers = Wakers::default();
    match Backend::of(&url) {
        Some(Backend::Sqlite) => on(config, &SqliteStore::connect(&url, wakers).await?, command).await,
        Some(Backend::Postgres) => on(config, &PgStore::connect(&url, wakers).await?, command).await,
        None => anyhow::bail!(
            "--database-url is not understood: use sqlite://PATH or postgres://USER:PASS@HOST/DB"
        ),
    }
}

async fn on<S: Store>(config: &Config, store: &S, command: &ServerCommand) -> anyhow::Result<()> {
    // Rows an older version wrote, made whole before any command reads them.
    if let Err(e) = crate::jobs::backfill::state_digests(store).await {
        store.close().await;
        return Err(e.into());
    }
    let result = match command {
        ServerCommand::Token { command } => tokens(store, command).await,
        ServerCommand::Prune {
            dry_run,
            project,
            keep_days,
            keep_ancestors,
            item_log_days,
            commit_link_days,
        } => {
            let policy = Policy {
                keep_days: keep_days.unwrap_or(config.keep_days),
                keep_ancestors: keep_ancestors.unwrap_or(config.keep_ancestors),
                item_log_days: item_log_days.unwrap_or(config.item_log_days),
                commit_link_days: commit_link_days.unwrap_or(config.commit_link_days),
            };
            prune(store, policy, *dry_run, project.clone()).await
        }
        ServerCommand::Compact { project, below_revision } => {
            let actor = Actor { token: "baton-server compact".into(), ..Actor::default() };
            let done =
                crate::service::retention::compact(store, project.clone(), *below_revision, actor).await?;
            println!(
                "removed {} events of {project}; the oldest kept is revision {} (event {})",
                done.removed_events, done.oldest_kept_revision, done.revision
            );
            Ok(())
        }
        ServerCommand::Purge { project, value, dry_run } => {
            purge(store, project, value.clone(), *dry_run).await
        }
        ServerCommand::Export { output, project } => export(store, output, project.as_deref()).await,
        ServerCommand::Import { input, project, dry_run } => {
            let options = crate::archive::Options {
                only: project.as_deref(),
                max_checkpoint_bytes: config.max_checkpoint_bytes,
            };
            import(store, input, options, *dry_run).await
        }
        ServerCommand::Healthcheck { .. } => Ok(()),
    };
    store.close().await;
    result
}

async fn purge<S: Store>(
    store: &S,
    project: &str,
    value: Option<String>,
    dry_run: bool,
) -> anyhow::Result<()> {
    let value = if let Some(v) = value {
        v
    } else {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).context("reading the value to purge from stdin")?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    crate::api::admin::check_purge_value(&value).map_err(|e| anyhow::anyhow!("{e}"))?;
    let actor = Actor { token: "baton-server purge".into(), ..Actor::default() };
    let done = crate::service::purge::purge(store, project.to_owned(), value, dry_run, actor).await?;
    let verb = if dry_run { "would change" } else { "changed" };
    println!(
        "{project}: {verb} {} records, {} events, {} conflicts, {} transcript chunks, {} stored replies{}",
        done.records,
        done.events,
        done.conflicts,
        done.chunks,
        done.replies,
        if done.revision > 0 { format!(" (revision {})", done.revision) } else { String::new() }
    );
    Ok(())
}

async fn export<S: Store>(store: &S, output: &std::path::Path, project: Option<&str>) -> anyhow::Result<()> {
    let report = if output.as_os_str() == "-" {
        crate::archive::export(store, project, std::io::stdout().lock()).await?
    } else if std::fs::symlink_metadata(output).is_ok_and(|m| !m.file_type().is_file()) {
        // Not a file to replace (a device such as /dev/null, a pipe, a link): written to.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(output)
            .with_context(|| format!("cannot open {}", output.display()))?;
        crate::archive::export(store, project, std::io::BufWriter::new(file)).await?
    } else {
        export_file(store, output, project).await?
    };
    for (project, lines) in &report {
        eprintln!("exported {project}: {lines} records");
    }
    eprintln!(
        "{} exported",
        if report.len() == 1 { "1 project".to_owned() } else { format!("{} projects", report.len()) }
    );
    Ok(())
}

/// Writes the archive beside `output` and renames it over when it is whole and synced: a
/// failed export or a power cut leaves the archive that was there, never a part of one.
async fn export_file<S: Store>(
    store: &S,
    output: &std::path::Path,
    project: Option<&str>,
) -> anyhow::Result<Vec<(String, u64)>> {
    let name = output.file_name().with_context(|| format!("{} is not a file name", output.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.baton-tmp", std::process::id()));
    let tmp = output.with_file_name(tmp_name);
    let written = async {
        let file = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut out = std::io::BufWriter::new(file);
        let report = crate::archive::export(store, project, &mut out).await?;
        out.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()?;
        std::fs::rename(&tmp, output).with_context(|| format!("cannot write {}", output.display()))?;
        crate::disk::sync_dir(crate::disk::parent_of(output))?;
        anyhow::Ok(report)
    }
    .await;
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

async fn import<S: Store>(
    store: &S,
    input: &std::path::Path,
    options: crate::archive::Options<'_>,
    dry_run: bool,
) -> anyhow::Result<()> {
    let file = if input.as_os_str() == "-" {
        // Read twice (checked, then written): stdin is kept in an unnamed temporary file.
        let mut spool = tempfile::tempfile().context("creating a temporary file for the archive")?;
        std::io::copy(&mut std::io::stdin().lock(), &mut spool).context("reading the archive from stdin")?;
        std::io::Seek::rewind(&mut spool).context("reading the archive back from its temporary file")?;
        spool
    } else {
        std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?
    };
    let report = crate::archive::import(store, std::io::BufReader::new(file), options, dry_run).await?;
    let verb = if dry_run { "would import" } else { "imported" };
    for (project, counts) in &report {
        println!("{project}: {verb} {}, already present {}", counts.imported, counts.skipped);
    }
    if dry_run {
        println!("dry run: nothing was written");
    }
    Ok(())
}

async fn prune<S: Store>(
    store: &S,
    policy: Policy,
    dry_run: bool,
    project: Option<String>,
) -> anyhow::Result<()> {
    let actor = Actor { token: "baton-server prune".into(), ..Actor::default() };
    let changed = retention::prune(store, project, policy, dry_run, actor).await?;
    let verb = if dry_run { "would remove" } else { "removed" };
    let other = |p: &ProjectPruned| !p.removed_item_logs.is_empty() || p.removed_commit_links > 0;
    for p in changed.iter().filter(|p| !p.removed_checkpoints.is_empty() || !other(p)) {
        println!(
            "{}: {verb} {} checkpoints and {} chunks, re-parent {}{}",
            p.project,
            p.removed_checkpoints.len(),
            p.removed_chunks,
            p.reparented.len(),
            if dry_run { String::new() } else { format!(" (revision {})", p.revision) }
        );
        for id in &p.removed_checkpoints {
            println!("  - {id}");
        }
        for r in &p.reparented {
            let to = if r.parent_id.is_empty() { "(root)" } else { &r.parent_id };
            println!("  ~ {} -> {to}", r.checkpoint_id);
        }
    }
    for p in changed.iter().filter(|p| !p.removed_item_logs.is_empty()) {
        {
            println!(
                "{}: {verb} {} item logs not changed for {} days{}",
                p.project,
                p.removed_item_logs.len(),
                policy.item_log_days,
                if dry_run { String::new() } else { format!(" (revision {})", p.item_logs_revision) }
            );
            for key in &p.removed_item_logs {
                println!("  - {key:?}");
            }
        }
    }
    for p in changed.iter().filter(|p| p.removed_commit_links > 0) {
        println!(
            "{}: {verb} {} commit links recorded more than {} days ago{}",
            p.project,
            p.removed_commit_links,
            policy.commit_link_days,
            if dry_run { String::new() } else { format!(" (revision {})", p.commit_links_revision) }
        );
    }
    if changed.is_empty() {
        println!(
            "nothing to prune: no checkpoint older than {} days beyond each session's head and {} ancestors",
            policy.keep_days, policy.keep_ancestors
        );
    }
    Ok(())
}

async fn tokens<S: Store>(store: &S, command: &config::TokenCommand) -> anyhow::Result<()> {
    use config::TokenCommand;
    match command {
        TokenCommand::Create { name, role, project } => {
            let secret = core::access::new_secret();
            let first = !crate::store::any_tokens(store).await?;
            let hash = core::access::hash_secret(&secret);
            crate::service::tokens::create(store, name.clone(), role.clone(), project.clone(), hash).await?;
            println!("{secret}");
            eprintln!(
                "created {role} token {name:?}{}. The secret above is shown only once: give it to its user (BATON_TOKEN).",
                project.as_ref().map(|p| format!(" for project {p}")).unwrap_or_default()
            );
            if first {
                eprintln!(
                    "This is the first token: from now on every request needs a token, loopback included."
                );
            }
        }
        TokenCommand::List => {
            for t in store.tokens(crate::store::model::TokenKey::All).await? {
                let state = if t.revoked_us.is_some() { "revoked" } else { "active" };
                let used = t.last_used_us.map_or("never used".to_owned(), |u| {
                    chrono::DateTime::from_timestamp_micros(u)
                        .map(|d| format!("last used {}", d.to_rfc3339()))
                        .unwrap_or_default()
                });
                println!("{}\t{}\t{}\t{state}\t{used}", t.name, t.role, t.project.as_deref().unwrap_or("*"));
            }
        }
        TokenCommand::Revoke { name } => {
            if store
                .write_token(crate::store::model::TokenWrite::Revoke {
                    name: name.clone(),
                    now_us: crate::core::time::now_us(),
                })
                .await?
            {
                eprintln!(
                    "revoked token {name:?} (servers stop accepting it within {} s)",
                    auth::TTL.as_secs()
                );
            } else {
                anyhow::bail!("no active token named {name:?} (see `baton-server token list`)");
            }
        }
    }
    Ok(())
}

/// Asks the server at `url` (default: the one listening on `listen`, via loopback when it
/// listens on all addresses) whether it is serving.
pub async fn healthcheck(
    listen: std::net::SocketAddr,
    url: Option<&str>,
    ca_cert: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let url = if let Some(url) = url {
        url.to_owned()
    } else {
        let mut addr = listen;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    };
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.clone())
        .with_context(|| format!("{url:?} is not a valid URL"))?
        .connect_timeout(std::time::Duration::from_secs(3))
        .timeout(std::time::Duration::from_secs(5));
    if url.starts_with("https://") {
        let mut tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = ca_cert {
            let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
            tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls)?;
    }
    let channel = endpoint.connect().await.with_context(|| format!("no baton-server answers on {url}"))?;
    let reply = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .with_context(|| format!("the health check of {url} failed"))?
        .into_inner();
    if reply.status != tonic_health::pb::health_check_response::ServingStatus::Serving as i32 {
        anyhow::bail!("baton-server on {url} is not serving");
    }
    println!("serving");
    Ok(())
}
