//! The request stream a replay saw, for cross-checking with other simulators: every publish (an
//! insert) and every read (a lookup), with object ids for positions, sizes, times and the index of
//! the object's next request. Written as libCacheSim's `oracleGeneral` binary or as CSV.

use super::strategy::EntryKey;
use crate::cache::fast_hash::FastMap;
use crate::error::{Error, Result};
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub ts_us: i64,
    pub object: u64,
    pub size: u32,
    pub is_read: bool,
}

#[derive(Debug, Default)]
pub struct RequestLog {
    pub requests: Vec<Request>,
    ids: FastMap<EntryKey, u64>,
}

impl RequestLog {
    pub fn record(&mut self, ts_us: i64, key: EntryKey, size: u32, is_read: bool) {
        let next = self.ids.len() as u64 + 1;
        let object = *self.ids.entry(key).or_insert(next);
        self.requests.push(Request {
            ts_us,
            object,
            size,
            is_read,
        });
    }

    /// For each request, the index of the next request for the same object (-1: none).
    pub fn next_access(&self) -> Vec<i64> {
        let mut next = vec![-1i64; self.requests.len()];
        let mut seen: FastMap<u64, i64> = FastMap::default();
        for (i, r) in self.requests.iter().enumerate().rev() {
            if let Some(&j) = seen.get(&r.object) {
                next[i] = j;
            }
            seen.insert(r.object, i as i64);
        }
        next
    }

    fn create(path: &Path) -> Result<BufWriter<std::fs::File>> {
        let f = std::fs::File::create(path)
            .map_err(|e| Error::storage(format!("cannot create {}", path.display()), e))?;
        Ok(BufWriter::new(f))
    }

    /// libCacheSim's oracleGeneral: packed little-endian records of
    /// `u32 clock_time (s), u64 obj_id, u32 obj_size, i64 next_access_vtime`.
    pub fn write_oracle_general(&self, path: &Path) -> Result<()> {
        let mut w = Self::create(path)?;
        let origin = self.requests.first().map_or(0, |r| r.ts_us);
        for (r, next) in self.requests.iter().zip(self.next_access()) {
            let secs = ((r.ts_us - origin) / 1_000_000).clamp(0, u32::MAX as i64) as u32;
            let mut rec = [0u8; 24];
            rec[..4].copy_from_slice(&secs.to_le_bytes());
            rec[4..12].copy_from_slice(&r.object.to_le_bytes());
            rec[12..16].copy_from_slice(&r.size.to_le_bytes());
            rec[16..].copy_from_slice(&next.to_le_bytes());
            w.write_all(&rec)
                .map_err(|e| Error::storage(path.display(), e))?;
        }
        w.flush().map_err(|e| Error::storage(path.display(), e))
    }

    /// CSV with a header: `ts_us,obj_id,size,next_access_vtime,op` (op: `insert` or `read`).
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut w = Self::create(path)?;
        let io = |e| Error::storage(path.display(), e);
        writeln!(w, "ts_us,obj_id,size,next_access_vtime,op").map_err(io)?;
        for (r, next) in self.requests.iter().zip(self.next_access()) {
            let op = if r.is_read { "read" } else { "insert" };
            writeln!(w, "{},{},{},{},{}", r.ts_us, r.object, r.size, next, op).map_err(io)?;
        }
        w.flush().map_err(io)
    }
}
