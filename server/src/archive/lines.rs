//! Reading an archive: a zstd stream of JSON lines, each read with a limit, the header
//! checked before anything else.

use std::io::{BufRead, BufReader, Read};

use anyhow::Context;

use crate::store::transfer::{FORMAT, Line, VERSION};

/// The longest line an archive may hold: a checkpoint at the default size limit (its state
/// and payload base64-encoded in JSON) fits several times over; a longer one is refused
/// once this much is read, never held whole.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// The archive's lines after its header, parsed, each with its line number (from 1).
pub fn records(input: impl Read) -> anyhow::Result<impl Iterator<Item = anyhow::Result<(usize, Line)>>> {
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
    Ok(lines.map(|(n, line)| {
        let n = n + 1;
        let line = line.map_err(|e| e.context(format!("reading line {n} of the archive")))?;
        let parsed: Line =
            serde_json::from_str(&line).with_context(|| format!("line {n} of the archive is not valid"))?;
        if matches!(parsed, Line::Header { .. }) {
            anyhow::bail!("line {n}: a second header");
        }
        Ok((n, parsed))
    }))
}

/// The lines, each read with `MAX_LINE` as its limit; numbered from 0.
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
