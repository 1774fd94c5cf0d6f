//! `baton-server export` and `import`: move a laptop's history into a team server. The
//! archive is a zstd stream of JSON lines (`store::transfer::Line`): a header, then per
//! project its settings, chunks, sessions, checkpoints (with threads' pending writes), memory,
//! memory records, item logs and their items. Import
//! keeps ids, renumbers revisions into the target project's log (one event per imported
//! record), and skips ids the target already has, so running it twice changes nothing.

use std::io::{Read, Seek, SeekFrom, Write};

use anyhow::Context;

use crate::store::Store;
use crate::store::transfer::{Cursor, FORMAT, ImportCounts, Line, Table, VERSION};

mod lines;
mod plan;
mod rules;

pub use plan::Options;

const PAGE: i64 = 200;
const BATCH: usize = 500;

/// What an export wrote, per project: (project, lines).
pub async fn export<S: Store>(
    store: &S,
    only: Option<&str>,
    out: impl Write,
) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = zstd::Encoder::new(out, 3).context("starting the zstd stream")?;
    let header = Line::Header {
        format: FORMAT.into(),
        version: VERSION,
        exported_at_us: chrono::Utc::now().timestamp_micros(),
    };
    write_line(&mut out, &header)?;
    let mut report = Vec::new();
    let projects = store.projects(None).await?;
    if let Some(only) = only
        && !projects.iter().any(|p| p.key == only)
    {
        anyhow::bail!("no project {only:?} in this database");
    }
    for row in projects.into_iter().filter(|p| only.is_none_or(|o| o == p.key)) {
        let project = row.key;
        write_line(&mut out, &Line::Project { key: project.clone(), memory_caps: row.memory_caps })?;
        let mut lines = 0;
        for table in Table::ALL {
            let mut after = Cursor::default();
            loop {
                let (page, next) =
                    crate::service::export::page(store, project.clone(), table, after, PAGE).await?;
                for line in &page {
                    write_line(&mut out, line)?;
                }
                lines += page.len() as u64;
                match next {
                    Some(n) => after = n,
                    None => break,
                }
            }
        }
        report.push((project, lines));
    }
    out.finish().context("finishing the zstd stream")?.flush()?;
    Ok(report)
}

fn write_line(out: &mut impl Write, line: &Line) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// What an import did (or, with `dry_run`, would do), per project.
///
/// Two passes over the archive: the first checks every line of the chosen projects and
/// resolves what they point at (`plan`), so that a refused archive writes nothing; the
/// second writes, re-checking each line as it goes (the file is read again).
pub async fn import<S: Store>(
    store: &S,
    mut input: impl Read + Seek,
    options: Options<'_>,
    dry_run: bool,
) -> anyhow::Result<Vec<(String, ImportCounts)>> {
    let planned = plan::plan(store, &mut input, options).await?;
    if dry_run {
        return Ok(planned);
    }
    input.seek(SeekFrom::Start(0)).context("reading the archive again")?;
    let mut report: Vec<(String, ImportCounts)> = Vec::new();
    let mut project: Option<(String, Option<String>)> = None;
    let mut batch = Vec::new();
    for item in lines::records(input)? {
        let (n, line) = item?;
        match line {
            Line::Project { key, memory_caps } => {
                flush(store, &mut project, &mut batch, &mut report).await?;
                // Each project once (the first pass refused an archive giving one again).
                project = options.takes(&key).then(|| {
                    report.push((key.clone(), ImportCounts::default()));
                    (key, Some(memory_caps))
                });
            }
            other => {
                let Some((key, _)) = &project else { continue };
                rules::check(&other, options.max_checkpoint_bytes).map_err(|e| {
                    anyhow::anyhow!(
                        "line {n} of the archive ({}) changed since it was checked: {e}; project {key:?} is imported up to it",
                        plan::what(&other)
                    )
                })?;
                batch.push(other);
                if batch.len() >= BATCH {
                    flush(store, &mut project, &mut batch, &mut report).await?;
                }
            }
        }
    }
    flush(store, &mut project, &mut batch, &mut report).await?;
    Ok(report)
}

async fn flush<S: Store>(
    store: &S,
    project: &mut Option<(String, Option<String>)>,
    batch: &mut Vec<Line>,
    report: &mut [(String, ImportCounts)],
) -> anyhow::Result<()> {
    let Some((key, caps)) = project.as_mut() else { return Ok(()) };
    if batch.is_empty() && caps.is_none() {
        return Ok(());
    }
    let counts = crate::service::import::batch(store, key.clone(), caps.take(), std::mem::take(batch))
        .await
        .with_context(|| format!("importing into project {key}"))?;
    if let Some((_, total)) = report.last_mut() {
        total.imported += counts.imported;
        total.skipped += counts.skipped;
    }
    Ok(())
}
