//! `baton-server export` and `import`: move a laptop's history into a team server. The
//! archive is a zstd stream of JSON lines (`store::transfer::Line`): a header, then per
//! project its settings, chunks, sessions, checkpoints, memory and memory records. Import
//! keeps ids, renumbers revisions into the target project's log (one event per imported
//! record), and skips ids the target already has, so running it twice changes nothing.

use std::io::{BufRead, BufReader, Read, Write};

use anyhow::Context;

use crate::store::Store;
use crate::store::transfer::{Cursor, FORMAT, ImportCounts, Line, Table, VERSION};

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
    let projects = store.list_projects().await?;
    if let Some(only) = only
        && !projects.iter().any(|(p, _)| p == only)
    {
        anyhow::bail!("no project {only:?} in this database");
    }
    for (project, memory_caps) in projects.into_iter().filter(|(p, _)| only.is_none_or(|o| o == p)) {
        write_line(&mut out, &Line::Project { key: project.clone(), memory_caps })?;
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

/// The longest line an archive may hold: a checkpoint at the default size limit (its state
/// and payload base64-encoded in JSON) fits several times over; a longer one is refused
/// once this much is read, never held whole.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// The archive's lines, each read with `MAX_LINE` as its limit.
fn bounded_lines(mut reader: impl BufRead) -> impl Iterator<Item = (usize, anyhow::Result<String>)> {
    let mut n = 0;
    std::iter::from_fn(move || {
        let mut line = Vec::new();
        let read = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line);
        let at = n;
        n += 1;
        match read {
            Ok(0) => None,
            Err(e) => Some((at, Err(anyhow::Error::new(e)))),
            Ok(_) if line.len() > MAX_LINE => Some((
                at,
                Err(anyhow::anyhow!(
                    "a line longer than {} MiB: not an archive this server wrote",
                    MAX_LINE >> 20
                )),
            )),
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Some((at, String::from_utf8(line).map_err(|_| anyhow::anyhow!("a line that is not UTF-8"))))
            }
        }
    })
}

/// What an import did, per project.
pub async fn import<S: Store>(store: &S, input: impl Read) -> anyhow::Result<Vec<(String, ImportCounts)>> {
    let reader = BufReader::new(zstd::Decoder::new(input).context("the archive is not a zstd stream")?);
    let mut lines = bounded_lines(reader);
    match lines.next() {
        Some((_, Ok(first))) => match serde_json::from_str::<Line>(&first) {
            Ok(Line::Header { format, version, .. }) if format == FORMAT && version == VERSION => {}
            Ok(Line::Header { format, version, .. }) => {
                anyhow::bail!(
                    "this archive is {format} version {version}; this server reads {FORMAT} version {VERSION}"
                )
            }
            _ => anyhow::bail!("not a Baton export: the first line is not a {FORMAT} header"),
        },
        Some((_, Err(e))) => {
            return Err(e.context("reading the archive (is it a `baton-server export` file?)"));
        }
        None => anyhow::bail!("the archive is empty"),
    }
    let mut report: Vec<(String, ImportCounts)> = Vec::new();
    let mut project: Option<(String, Option<String>)> = None;
    let mut batch = Vec::new();
    for (n, line) in lines {
        let line = line.map_err(|e| e.context(format!("reading line {} of the archive", n + 1)))?;
        let parsed: Line = serde_json::from_str(&line)
            .with_context(|| format!("line {} of the archive is not valid", n + 1))?;
        match parsed {
            Line::Header { .. } => anyhow::bail!("line {}: a second header", n + 1),
            Line::Project { key, memory_caps } => {
                flush(store, &mut project, &mut batch, &mut report).await?;
                crate::core::validate::project("project", &key)
                    .map_err(|e| anyhow::anyhow!("line {}: {e}", n + 1))?;
                report.push((key.clone(), ImportCounts::default()));
                project = Some((key, Some(memory_caps)));
            }
            other => {
                if project.is_none() {
                    anyhow::bail!("line {}: a record before any project line", n + 1);
                }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A line past the limit is refused after reading at most the limit, not held whole.
    #[test]
    fn lines_are_read_with_a_limit() {
        let text = b"first\nsecond\n\nlast".to_vec();
        let lines: Vec<String> = bounded_lines(&text[..]).map(|(_, l)| l.unwrap()).collect();
        assert_eq!(lines, ["first", "second", "", "last"]);
        let endless = std::io::repeat(b'x');
        let (at, first) = bounded_lines(std::io::BufReader::new(endless)).next().unwrap();
        assert_eq!(at, 0);
        assert!(first.unwrap_err().to_string().contains("longer than 64 MiB"));
    }
}
