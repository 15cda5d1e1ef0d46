//! Durable cursors of a [`FileStorage`]: one append-only log per managed ledger,
//! `<managed ledger dir>/cursors.log`, framed like a segment (`docs/storage.md` has the format).
//!
//! * Why a log of changes and not a file per cursor rewritten on each ack: an ack is then one
//!   positional write of a few dozen bytes (and one `fdatasync` under `sync="always"`), as an
//!   entry append is, and it lands whole or not at all by the same rollback. A rename per ack would
//!   cost a directory sync too.
//! * An ack is logged as a delta (the acknowledged position, if it is still acknowledged on its
//!   own, and the mark-delete position after it), so its cost does not grow with the ranges a
//!   cursor holds; anything else (a new cursor, reset, skip, clear-backlog) logs the whole state.
//! * The log is rewritten from the live state (temp file, fsync, rename, directory fsync) once it
//!   is four times the live state's size and at least 64 KiB, so its size stays within a constant
//!   factor of the cursors it holds and each rewrite is paid for by the appends before it.
//! * Loading reads the file once: every length is checked against what is left of the file
//!   before anything is allocated by it. A tail that is an unfinished write (or the last record
//!   with a bad payload checksum, which a torn page leaves) was never acknowledged and is cut off
//!   by a read-write open; damage before the last record is refused, naming the file and offset.

use super::{
    io_err, le32, record_header, sync_dir, FileOptions, FileStorage, Recovered, SyncPolicy,
    MAX_ENTRY_BYTES, RECORD_HEADER,
};
use crate::broker::positions::acked::AckedRanges;
use crate::broker::storage::{CursorUpdate, DurableCursor};
use crate::cache::position::Position;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub(super) const LOG_FILE: &str = "cursors.log";
const TMP_FILE: &str = "cursors.log.tmp";
const MAGIC: &[u8; 8] = b"LCCUR1\0\0";
const HEADER: u64 = 8;
/// A log smaller than this is never rewritten: a few cursors' churn is not worth a rename.
const COMPACT_MIN: u64 = 64 * 1024;
/// ... and a larger one once it is this many times the size of its live state.
const COMPACT_FACTOR: u64 = 4;

const FULL: u8 = 1;
const ACKED: u8 = 2;
const DELETED: u8 = 3;

struct Live {
    mark_delete: Position,
    acked: AckedRanges,
}

/// One managed ledger's cursor log, loaded.
pub(super) struct CursorLog {
    path: PathBuf,
    /// `None` until the first change creates the file (or in a read-only store).
    file: Option<File>,
    /// Where the next record goes.
    end: u64,
    cursors: BTreeMap<String, Live>,
    /// The log is rewritten when `end` reaches this.
    compact_at: u64,
    /// A failed write left bytes past `end` that could not be truncated yet.
    dirty_tail: bool,
}

/// Reads little-endian fields from a record's payload; every read is checked against its end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(le32(self.take(4)?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn position(&mut self) -> Option<Position> {
        Some(Position::new(self.i64()?, self.i64()?))
    }
}

/// A decoded record.
enum Change {
    Full(DurableCursor),
    Acked {
        name: String,
        acked: Option<Position>,
        mark_delete: Position,
    },
    Deleted(String),
}

fn put_position(out: &mut Vec<u8>, p: Position) {
    out.extend_from_slice(&p.ledger_id.to_le_bytes());
    out.extend_from_slice(&p.entry_id.to_le_bytes());
}

fn put_name(out: &mut Vec<u8>, kind: u8, name: &str) {
    out.push(kind);
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

fn put_full(out: &mut Vec<u8>, name: &str, mark_delete: Position, acked: &[(i64, i64, i64)]) {
    put_name(out, FULL, name);
    put_position(out, mark_delete);
    out.extend_from_slice(&(acked.len() as u32).to_le_bytes());
    for &(ledger, first, last) in acked {
        out.extend_from_slice(&ledger.to_le_bytes());
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&last.to_le_bytes());
    }
}

/// The payload of one change.
fn encode(update: &CursorUpdate<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match update {
        CursorUpdate::Full(c) => put_full(&mut out, &c.name, c.mark_delete, &c.acked),
        CursorUpdate::Acked {
            name,
            acked,
            mark_delete,
        } => {
            put_name(&mut out, ACKED, name);
            put_position(&mut out, *mark_delete);
            match acked {
                Some(p) => {
                    out.push(1);
                    put_position(&mut out, *p);
                }
                None => out.push(0),
            }
        }
        CursorUpdate::Deleted { name } => put_name(&mut out, DELETED, name),
    }
    out
}

/// Decodes a payload whose checksum matched; `None` for one this version does not understand.
fn decode(payload: &[u8]) -> Option<Change> {
    let mut f = Fields(payload);
    let kind = f.u8()?;
    let len = f.u32()? as usize;
    let name = String::from_utf8(f.take(len)?.to_vec()).ok()?;
    let change = match kind {
        FULL => {
            let mark_delete = f.position()?;
            let count = f.u32()? as usize;
            // The count is believed only if the payload holds that many ranges.
            if count.checked_mul(24)? != f.0.len() {
                return None;
            }
            let mut acked = Vec::with_capacity(count);
            for _ in 0..count {
                acked.push((f.i64()?, f.i64()?, f.i64()?));
            }
            Change::Full(DurableCursor {
                name,
                mark_delete,
                acked,
            })
        }
        ACKED => {
            let mark_delete = f.position()?;
            let acked = match f.u8()? {
                0 => None,
                1 => Some(f.position()?),
                _ => return None,
            };
            Change::Acked {
                name,
                acked,
                mark_delete,
            }
        }
        DELETED => Change::Deleted(name),
        _ => return None,
    };
    f.0.is_empty().then_some(change)
}

fn apply(cursors: &mut BTreeMap<String, Live>, change: Change) {
    match change {
        Change::Full(c) => {
            let mut acked = AckedRanges::default();
            for (ledger, first, last) in c.acked {
                acked.insert(ledger, first, last);
            }
            cursors.insert(
                c.name,
                Live {
                    mark_delete: c.mark_delete,
                    acked,
                },
            );
        }
        Change::Acked {
            name,
            acked,
            mark_delete,
        } => {
            let live = cursors.entry(name).or_insert_with(|| Live {
                mark_delete,
                acked: AckedRanges::default(),
            });
            live.mark_delete = live.mark_delete.max(mark_delete);
            if let Some(p) = acked {
                live.acked.insert(p.ledger_id, p.entry_id, p.entry_id);
            }
            live.acked.remove_through(live.mark_delete);
        }
        Change::Deleted(name) => {
            cursors.remove(&name);
        }
    }
}

fn full_size(name: &str, ranges: usize) -> u64 {
    RECORD_HEADER + 1 + 4 + name.len() as u64 + 16 + 4 + 24 * ranges as u64
}

/// The log size at which the next rewrite happens, for a live state of `live` bytes.
fn compact_at(live: u64) -> u64 {
    live.saturating_mul(COMPACT_FACTOR)
        .max(live.saturating_add(COMPACT_MIN))
}

impl CursorLog {
    fn corrupt(&self, offset: u64, reason: &str) -> Error {
        Error::CorruptSegment {
            file: self.path.display().to_string(),
            offset,
            reason: format!(
                "cursor log: {reason} (not an unfinished write); the managed ledger's cursors \
                 cannot be recovered from it: move the file away to open the ledger with no \
                 cursors"
            ),
        }
    }

    fn live_size(&self) -> u64 {
        self.cursors
            .iter()
            .map(|(name, l)| full_size(name, l.acked.iter().count()))
            .fold(HEADER, u64::saturating_add)
    }

    /// Loads `owner_dir`'s log; a read-write open cuts a torn tail and lists it in `recovered`.
    pub(super) fn load(
        owner_dir: &Path,
        options: FileOptions,
        recovered: &mut Vec<Recovered>,
    ) -> Result<CursorLog> {
        let path = owner_dir.join(LOG_FILE);
        let read_only = options.read_only;
        let mut log = CursorLog {
            path,
            file: None,
            end: 0,
            cursors: BTreeMap::new(),
            compact_at: 0,
            dirty_tail: false,
        };
        if !read_only {
            // A rewrite that died before its rename; the log itself is whole.
            let _ = fs::remove_file(owner_dir.join(TMP_FILE));
        }
        let file = match OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(&log.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(log),
            Err(e) => return Err(io_err(&log.path, "cannot open", e)),
        };
        let len = file
            .metadata()
            .map_err(|e| io_err(&log.path, "cannot stat", e))?
            .len();
        // Bounded by the file's size, which the rewrite keeps near the live state's.
        let mut bytes = vec![0u8; usize::try_from(len).map_err(|_| log.corrupt(0, "too large"))?];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| io_err(&log.path, "cannot read", e))?;
        let (good, torn) = log.scan(&bytes)?;
        if let Some(reason) = torn {
            if !read_only {
                let cut = |e| io_err(&log.path, "cannot truncate", e);
                file.set_len(good).map_err(cut)?;
                if good == 0 {
                    file.write_all_at(MAGIC, 0)
                        .map_err(|e| io_err(&log.path, "cannot write", e))?;
                }
                if options.sync == SyncPolicy::Always {
                    file.sync_all()
                        .map_err(|e| io_err(&log.path, "cannot sync", e))?;
                }
                recovered.push(Recovered {
                    path: log.path.clone(),
                    offset: good.max(HEADER),
                    reason,
                });
            }
        }
        log.end = good.max(HEADER);
        log.file = Some(file);
        log.compact_at = compact_at(log.live_size());
        Ok(log)
    }

    /// Applies the records of `bytes` to the live state; returns where the whole records end and,
    /// if what follows is an unfinished write, why.
    fn scan(&mut self, bytes: &[u8]) -> Result<(u64, Option<String>)> {
        let len = bytes.len();
        let head = len.min(HEADER as usize);
        if bytes[..head] != MAGIC[..head] {
            if bytes.iter().all(|&b| b == 0) {
                return Ok((0, Some("cursor log holds only zero bytes".into())));
            }
            return Err(self.corrupt(0, "not a ledgercache cursor log (bad magic)"));
        }
        if len < HEADER as usize {
            return Ok((
                0,
                Some(format!("new cursor log has {len} of 8 header bytes")),
            ));
        }
        let mut at = HEADER as usize;
        let rh = RECORD_HEADER as usize;
        while at < len {
            let rest = &bytes[at..];
            let torn = |why: &str| Ok((at as u64, Some(why.to_string())));
            // An OS crash can extend a file over blocks whose data never reached the disk.
            let zeros = || rest.iter().all(|&b| b == 0);
            if rest.len() < rh {
                return torn(&format!(
                    "incomplete record header ({} of 12 bytes)",
                    rest.len()
                ));
            }
            let n = le32(rest) as usize;
            if crc32fast::hash(&rest[..8]) != le32(&rest[8..]) {
                if zeros() {
                    return torn("zero-filled tail");
                }
                return Err(self.corrupt(at as u64, "record header checksum mismatch"));
            }
            if n as u64 > MAX_ENTRY_BYTES {
                return Err(
                    self.corrupt(at as u64, &format!("record length {n} is over the limit"))
                );
            }
            if rest.len() - rh < n {
                return torn(&format!(
                    "truncated record ({} of {n} payload bytes)",
                    rest.len() - rh
                ));
            }
            let payload = &rest[rh..rh + n];
            if crc32fast::hash(payload) != le32(&rest[4..8]) {
                if rest.len() == rh + n || rest[rh..].iter().all(|&b| b == 0) {
                    // The last record: a torn page of its write.
                    return torn("payload checksum mismatch in the last record");
                }
                return Err(self.corrupt(at as u64, "payload checksum mismatch"));
            }
            let change = decode(payload)
                .ok_or_else(|| self.corrupt(at as u64, "a record this version cannot read"))?;
            apply(&mut self.cursors, change);
            at += rh + n;
        }
        Ok((at as u64, None))
    }

    /// The log's file, created (with its directory) by the first change.
    fn file(&mut self, store: &FileStorage) -> Result<&File> {
        if self.file.is_none() {
            let owner_dir = self.path.parent().expect("the log is in a directory");
            let new_dir = !owner_dir.is_dir();
            fs::create_dir_all(owner_dir).map_err(|e| io_err(owner_dir, "cannot create", e))?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&self.path)
                .map_err(|e| io_err(&self.path, "cannot create", e))?;
            store
                .write_durably(&file, MAGIC, 0)
                .map_err(|e| io_err(&self.path, "cannot write", e))?;
            if store.options.sync == SyncPolicy::Always {
                sync_dir(owner_dir)?;
                if new_dir {
                    sync_dir(&store.dir)?;
                }
            }
            self.end = HEADER;
            self.compact_at = compact_at(HEADER);
            self.file = Some(file);
        }
        Ok(self.file.as_ref().expect("just created"))
    }

    /// Cuts the log back to its last whole record (after a failed write).
    fn truncate_back(&self, store: &FileStorage) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        file.set_len(self.end)?;
        if store.options.sync == SyncPolicy::Always {
            file.sync_data()?;
        }
        Ok(())
    }

    fn append(&mut self, store: &FileStorage, update: &CursorUpdate<'_>) -> Result<()> {
        let payload = encode(update);
        if payload.len() as u64 > MAX_ENTRY_BYTES {
            return Err(Error::invalid(
                "cursor",
                format!(
                    "cursor {:?} has too many acknowledged ranges to persist ({} bytes)",
                    update.name(),
                    payload.len()
                ),
            ));
        }
        self.file(store)?;
        if self.dirty_tail {
            self.truncate_back(store)
                .map_err(|e| io_err(&self.path, "cannot undo an earlier failed write in", e))?;
            self.dirty_tail = false;
        }
        let mut record = Vec::with_capacity(RECORD_HEADER as usize + payload.len());
        record.extend_from_slice(&record_header(&payload));
        record.extend_from_slice(&payload);
        let file = self.file.as_ref().expect("created above");
        if let Err(e) = store.write_durably(file, &record, self.end) {
            if self.truncate_back(store).is_err() {
                self.dirty_tail = true;
            }
            return Err(io_err(&self.path, "cannot write", e));
        }
        self.end += record.len() as u64;
        let change = decode(&payload).expect("a record this version wrote");
        apply(&mut self.cursors, change);
        // A failed rewrite leaves the log as it was, holding this change: it is retried later.
        if self.end >= self.compact_at && self.compact().is_err() {
            self.compact_at = self.end.saturating_add(COMPACT_MIN);
        }
        Ok(())
    }

    /// Rewrites the log as one whole-state record per cursor, atomically: the temp file is synced
    /// before the rename and the directory after it, whatever the sync policy, so a crash leaves
    /// either the old log or the new one, never a shorter one.
    fn compact(&mut self) -> Result<()> {
        let owner_dir = self.path.parent().expect("the log is in a directory");
        let tmp = owner_dir.join(TMP_FILE);
        let mut bytes = MAGIC.to_vec();
        let mut payload = Vec::new();
        for (name, live) in &self.cursors {
            payload.clear();
            let ranges: Vec<_> = live.acked.iter().collect();
            put_full(&mut payload, name, live.mark_delete, &ranges);
            bytes.extend_from_slice(&record_header(&payload));
            bytes.extend_from_slice(&payload);
        }
        let write = || -> std::io::Result<File> {
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            Ok(f)
        };
        let file = write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err(&self.path, "cannot rewrite", e)
        })?;
        // From here the new log is the log: adopt it before the directory sync can fail.
        self.file = Some(file);
        self.end = bytes.len() as u64;
        self.dirty_tail = false;
        self.compact_at = compact_at(self.end);
        sync_dir(owner_dir)
    }

    fn cursors(&self) -> Vec<DurableCursor> {
        self.cursors
            .iter()
            .map(|(name, l)| DurableCursor {
                name: name.clone(),
                mark_delete: l.mark_delete,
                acked: l.acked.iter().collect(),
            })
            .collect()
    }
}

impl FileStorage {
    /// Runs `f` on `owner`'s cursor log, loading it first if this is its first use.
    fn with_cursor_log<T>(
        &self,
        owner: &str,
        f: impl FnOnce(&mut CursorLog) -> Result<T>,
    ) -> Result<T> {
        self.open_check()?;
        let mut logs = self.cursor_logs.lock();
        self.open_check()?;
        if !logs.contains_key(owner) {
            // A managed ledger that had no directory when the store opened: no log to recover.
            let dir = self.dir.join(super::escape(owner));
            let log = CursorLog::load(&dir, self.options, &mut Vec::new());
            logs.insert(owner.to_string(), log);
        }
        match logs.get_mut(owner).expect("loaded above") {
            Ok(log) => f(log),
            // Damage found at open: every use names it.
            Err(e) => Err(e.clone()),
        }
    }

    pub(super) fn persist_cursor_change(
        &self,
        owner: &str,
        update: &CursorUpdate<'_>,
    ) -> Result<()> {
        if self.options.read_only {
            // A reader (a Spark executor) moves its cursors in memory only.
            return Ok(());
        }
        self.with_cursor_log(owner, |log| log.append(self, update))
    }

    pub(super) fn load_cursor_log(&self, owner: &str) -> Result<Vec<DurableCursor>> {
        self.with_cursor_log(owner, |log| Ok(log.cursors()))
    }

    /// The size of `owner`'s cursor log as this store wrote it (for tests and diagnostics).
    pub fn cursor_log_len(&self, owner: &str) -> Result<u64> {
        self.with_cursor_log(owner, |log| Ok(log.end))
    }

    /// Where `owner`'s cursor log is (it may not exist yet).
    pub fn cursor_log_path(&self, owner: &str) -> PathBuf {
        self.dir.join(super::escape(owner)).join(LOG_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Fault;
    use super::*;
    use crate::broker::storage::Storage;
    use std::sync::atomic::Ordering;

    const OWNER: &str = "persistent://t/ns/c";

    fn full(md: i64, acked: &[(i64, i64, i64)]) -> DurableCursor {
        DurableCursor {
            name: "c".into(),
            mark_delete: Position::new(1, md),
            acked: acked.to_vec(),
        }
    }

    /// A write of a cursor change that fails after any number of its bytes (or whose fsync fails),
    /// with the truncation that undoes it failing or not: the call fails, the log is as it was on
    /// disk and in memory, the next change lands, and a reopen finds exactly the changes that
    /// returned, with nothing to recover.
    #[test]
    fn a_failed_cursor_write_leaves_the_log_as_it_was() {
        let ack = CursorUpdate::Acked {
            name: "c",
            acked: Some(Position::new(1, 5)),
            mark_delete: Position::new(1, 2),
        };
        let record_len = RECORD_HEADER as usize + encode(&ack).len();
        for sync in [SyncPolicy::Never, SyncPolicy::Always] {
            let mut faults: Vec<(Fault, u32)> = (0..=record_len)
                .map(|n| (Fault::WriteFailsAfter(n), 0))
                .collect();
            faults.push((Fault::WriteFailsAfter(9), 1));
            if sync == SyncPolicy::Always {
                faults.push((Fault::SyncFails, 0));
            }
            for (fault, failing_truncates) in faults {
                let dir = tempfile::tempdir().unwrap();
                let options = FileOptions {
                    sync,
                    ..Default::default()
                };
                let s = FileStorage::open_with(dir.path(), options).unwrap();
                s.persist_cursor(OWNER, &CursorUpdate::Full(&full(0, &[])))
                    .unwrap();
                let len = s.cursor_log_len(OWNER).unwrap();
                *s.fault.lock() = Some(fault);
                s.failing_truncates
                    .store(failing_truncates, Ordering::Release);
                let err = s.persist_cursor(OWNER, &ack).unwrap_err();
                assert!(err.to_string().contains("cursors.log"), "{err}");
                assert_eq!(s.load_cursors(OWNER).unwrap(), [full(0, &[])], "{fault:?}");
                if failing_truncates == 0 {
                    let on_disk = fs::metadata(s.cursor_log_path(OWNER)).unwrap().len();
                    assert_eq!(on_disk, len, "{fault:?} {sync:?}");
                }
                s.persist_cursor(OWNER, &ack).unwrap();
                let want = [full(2, &[(1, 5, 5)])];
                assert_eq!(s.load_cursors(OWNER).unwrap(), want);
                s.close();
                let s = FileStorage::open_with(dir.path(), options).unwrap();
                assert!(s.recovered().is_empty(), "{fault:?}: {:?}", s.recovered());
                assert_eq!(s.load_cursors(OWNER).unwrap(), want, "{fault:?} {sync:?}");
            }
        }
    }

    /// Loading never believes a count or length from the file: a whole-state record whose range
    /// count claims more ranges than its payload holds is refused, however large the count.
    #[test]
    fn a_range_count_larger_than_the_record_is_refused_without_allocating_by_it() {
        let mut payload = Vec::new();
        put_full(&mut payload, "c", Position::new(1, 0), &[(1, 2, 3)]);
        let at = payload.len() - 24 - 4;
        payload[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&payload).is_none());
        let mut bytes = MAGIC.to_vec();
        for _ in 0..2 {
            bytes.extend_from_slice(&record_header(&payload));
            bytes.extend_from_slice(&payload);
        }
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        let path = s.cursor_log_path(OWNER);
        s.close();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &bytes).unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        let err = s.load_cursors(OWNER).unwrap_err().to_string();
        assert!(
            err.contains("cannot read") && err.contains("byte 8"),
            "{err}"
        );
    }
}
