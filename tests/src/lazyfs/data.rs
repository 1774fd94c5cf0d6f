//! A file's bytes in shared pages: a sync keeps the durable copy by cloning page handles, and
//! a write copies only the pages it changes, so syncing a large file (a Postgres WAL segment)
//! after a small write costs no copy of the whole file.

use std::sync::Arc;

const PAGE: usize = 4096;

/// A file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Data {
    len: usize,
    pages: Vec<Arc<[u8; PAGE]>>,
}

impl Data {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Up to `size` bytes from `offset` (fewer at the end of the file).
    pub fn read(&self, offset: usize, size: usize) -> Vec<u8> {
        let start = offset.min(self.len);
        let end = start.saturating_add(size).min(self.len);
        let mut out = Vec::with_capacity(end - start);
        let mut at = start;
        while at < end {
            let (page, within) = (at / PAGE, at % PAGE);
            let take = (PAGE - within).min(end - at);
            out.extend_from_slice(&self.pages[page][within..within + take]);
            at += take;
        }
        out
    }

    /// Writes `bytes` at `offset`, growing the file (with zeros) as needed.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) {
        let end = offset + bytes.len();
        if end > self.len {
            self.resize(end);
        }
        let mut done = 0;
        while done < bytes.len() {
            let at = offset + done;
            let (page, within) = (at / PAGE, at % PAGE);
            let take = (PAGE - within).min(bytes.len() - done);
            Arc::make_mut(&mut self.pages[page])[within..within + take]
                .copy_from_slice(&bytes[done..done + take]);
            done += take;
        }
    }

    /// Sets the size: new bytes read as zeros, also after a shrink and a regrow.
    pub fn resize(&mut self, len: usize) {
        if len < self.len && !len.is_multiple_of(PAGE) {
            let (page, within) = (len / PAGE, len % PAGE);
            Arc::make_mut(&mut self.pages[page])[within..].fill(0);
        }
        self.pages.resize_with(len.div_ceil(PAGE), || Arc::new([0; PAGE]));
        self.len = len;
    }
}

impl From<&[u8]> for Data {
    fn from(bytes: &[u8]) -> Self {
        let mut data = Self::default();
        data.write(0, bytes);
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_was_written_across_pages_and_zeros_after_a_shrink() {
        let mut d = Data::default();
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        d.write(100, &bytes);
        assert_eq!(d.len(), 10_100);
        assert_eq!(d.read(0, 100), vec![0; 100]);
        assert_eq!(d.read(100, 20_000), bytes);
        assert_eq!(d.read(5000, 3), bytes[4900..4903]);
        let synced = d.clone();
        d.write(4095, b"xy");
        assert_eq!(synced.read(4095, 2), bytes[3995..3997], "a clone keeps its own pages");
        d.resize(4097);
        d.resize(9000);
        assert_eq!(d.read(4097, 5000), vec![0; 4903], "a shrink then regrow reads zeros");
        assert_eq!(d.read(4095, 2), b"xy");
        d.resize(0);
        assert!(d.is_empty() && d.read(0, 10).is_empty());
    }
}
