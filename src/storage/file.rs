//! A persistent store: one segment file per ledger, in a directory per managed ledger.
//!
//! A segment starts with an 8-byte magic and holds records `[length u32][crc32 u32][bytes]`. Opening
//! a store scans record headers to rebuild the index; a record cut short (a crash mid-write) ends
//! the ledger's readable entries there, and a record whose checksum fails is reported when read.
//! Either way the error names the file and the byte offset, and every entry before it, and every
//! other file, stays readable. A contiguous read is one `pread`; the entries it returns are slices
//! of that one buffer, as BookKeeper's are.

use super::{check_range, Storage};
use crate::entry::Payload;
use crate::error::{Error, Result};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"LCSEG1\0\0";
const HEADER: u64 = 8;

struct Segment {
    owner: String,
    path: PathBuf,
    file: File,
    /// (offset of the record, payload length) per readable entry.
    records: Vec<(u64, u32)>,
    end: u64,
    /// Where the readable part ends early, and why.
    damaged: Option<(u64, String)>,
}

impl Segment {
    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::CorruptSegment {
            file: self.path.display().to_string(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Ledgers stored as segment files under a directory.
pub struct FileStorage {
    dir: PathBuf,
    next_id: AtomicI64,
    segments: RwLock<BTreeMap<i64, Arc<Mutex<Segment>>>>,
}

/// A directory name for a managed ledger name (topic names contain `/` and `:`).
fn escape(owner: &str) -> String {
    let mut out = String::new();
    for b in owner.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(dir: &str) -> String {
    let bytes = dir.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let Ok(b) = u8::from_str_radix(&dir[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::storage(format!("{what} {}", path.display()), e)
}

/// Reads a segment's record headers; stops at the first record that does not fit in the file.
fn scan(owner: String, path: PathBuf) -> Result<Segment> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .map_err(|e| io_err(&path, "cannot open", e))?;
    let len = file
        .metadata()
        .map_err(|e| io_err(&path, "cannot stat", e))?
        .len();
    let mut seg = Segment {
        owner,
        path,
        file: file.try_clone().map_err(|e| Error::storage("clone", e))?,
        records: Vec::new(),
        end: len,
        damaged: None,
    };
    let mut magic = [0u8; 8];
    if len < HEADER || file.read_exact(&mut magic).is_err() || &magic != MAGIC {
        seg.damaged = Some((0, "not a ledgercache segment (bad magic)".into()));
        seg.end = 0;
        return Ok(seg);
    }
    let mut offset = HEADER;
    let mut header = [0u8; 8];
    while offset < len {
        if offset + 8 > len {
            seg.damaged = Some((
                offset,
                format!("truncated record header ({} of 8 bytes)", len - offset),
            ));
            break;
        }
        seg.file
            .read_exact_at(&mut header, offset)
            .map_err(|e| io_err(&seg.path, "cannot read", e))?;
        let n = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        if offset + 8 + n as u64 > len {
            seg.damaged = Some((
                offset,
                format!("truncated record ({} of {} bytes)", len - offset - 8, n),
            ));
            break;
        }
        seg.records.push((offset, n));
        offset += 8 + n as u64;
    }
    seg.end = offset;
    Ok(seg)
}

impl FileStorage {
    /// Opens (creating if needed) a store in `dir`, indexing the segments already there.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, "cannot create", e))?;
        let mut segments = BTreeMap::new();
        let mut max_id = 0;
        for owner_dir in fs::read_dir(&dir).map_err(|e| io_err(&dir, "cannot list", e))? {
            let owner_dir = owner_dir
                .map_err(|e| io_err(&dir, "cannot list", e))?
                .path();
            if !owner_dir.is_dir() {
                continue;
            }
            let owner = unescape(&owner_dir.file_name().unwrap_or_default().to_string_lossy());
            for f in fs::read_dir(&owner_dir).map_err(|e| io_err(&owner_dir, "cannot list", e))? {
                let path = f.map_err(|e| io_err(&owner_dir, "cannot list", e))?.path();
                let Some(id) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".seg"))
                    .and_then(|n| n.parse::<i64>().ok())
                else {
                    continue;
                };
                max_id = max_id.max(id);
                segments.insert(id, Arc::new(Mutex::new(scan(owner.clone(), path)?)));
            }
        }
        Ok(FileStorage {
            dir,
            next_id: AtomicI64::new(max_id + 1),
            segments: RwLock::new(segments),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn segment(&self, ledger_id: i64) -> Result<Arc<Mutex<Segment>>> {
        self.segments
            .read()
            .get(&ledger_id)
            .cloned()
            .ok_or_else(|| Error::not_found("ledger", ledger_id))
    }
}

impl Storage for FileStorage {
    fn create_ledger(&self, owner: &str) -> Result<i64> {
        let id = self.next_id.fetch_add(1, Ordering::AcqRel);
        let owner_dir = self.dir.join(escape(owner));
        fs::create_dir_all(&owner_dir).map_err(|e| io_err(&owner_dir, "cannot create", e))?;
        let path = owner_dir.join(format!("{id}.seg"));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, "cannot create", e))?;
        file.write_all(MAGIC)
            .map_err(|e| io_err(&path, "cannot write", e))?;
        let seg = Segment {
            owner: owner.to_string(),
            path,
            file,
            records: Vec::new(),
            end: HEADER,
            damaged: None,
        };
        self.segments.write().insert(id, Arc::new(Mutex::new(seg)));
        Ok(id)
    }

    fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>> {
        let segments = self.segments.read();
        Ok(segments
            .iter()
            .filter_map(|(id, s)| {
                let s = s.lock();
                (s.owner == owner).then(|| (*id, s.records.len() as u64))
            })
            .collect())
    }

    fn append(&self, ledger_id: i64, data: &[u8]) -> Result<i64> {
        let seg = self.segment(ledger_id)?;
        let mut seg = seg.lock();
        if let Some((offset, reason)) = &seg.damaged {
            return Err(seg.corrupt(*offset, format!("{reason}; refusing to append after it")));
        }
        let n = u32::try_from(data.len())
            .map_err(|_| Error::invalid("data", "entries are limited to 4 GiB"))?;
        let mut record = Vec::with_capacity(8 + data.len());
        record.extend_from_slice(&n.to_le_bytes());
        record.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        record.extend_from_slice(data);
        seg.file
            .write_all(&record)
            .map_err(|e| io_err(&seg.path, "cannot write", e))?;
        let offset = seg.end;
        seg.records.push((offset, n));
        seg.end += record.len() as u64;
        Ok(seg.records.len() as i64 - 1)
    }

    fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>> {
        let seg = self.segment(ledger_id)?;
        let seg = seg.lock();
        let count = seg.records.len() as u64;
        if last >= 0 && last as u64 >= count {
            if let Some((offset, reason)) = &seg.damaged {
                return Err(seg.corrupt(
                    *offset,
                    format!("{reason}; entry {count} and later are lost"),
                ));
            }
        }
        check_range(ledger_id, first, last, count)?;
        let (start, _) = seg.records[first as usize];
        let (last_off, last_len) = seg.records[last as usize];
        let span_end = last_off + 8 + last_len as u64;
        let mut buf = vec![0u8; (span_end - start) as usize];
        seg.file
            .read_exact_at(&mut buf, start)
            .map_err(|e| io_err(&seg.path, "cannot read", e))?;
        let buf = Bytes::from(buf);
        let mut out = Vec::with_capacity((last - first + 1) as usize);
        for &(offset, n) in &seg.records[first as usize..=last as usize] {
            let at = (offset - start) as usize;
            let crc = u32::from_le_bytes(buf[at + 4..at + 8].try_into().expect("4 bytes"));
            let data = buf.slice(at + 8..at + 8 + n as usize);
            if crc32fast::hash(&data) != crc {
                return Err(seg.corrupt(offset, "checksum mismatch"));
            }
            out.push(Payload::from(data));
        }
        Ok(out)
    }

    fn delete_ledger(&self, ledger_id: i64) -> Result<()> {
        let seg = self
            .segments
            .write()
            .remove(&ledger_id)
            .ok_or_else(|| Error::not_found("ledger", ledger_id))?;
        let path = seg.lock().path.clone();
        fs::remove_file(&path).map_err(|e| io_err(&path, "cannot delete", e))
    }

    fn describe(&self) -> String {
        format!("FileStorage({})", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_names_round_trip_through_directory_names() {
        for name in [
            "persistent://public/default/orders",
            "a b%c",
            "plain-name_1.x",
        ] {
            let e = escape(name);
            assert!(!e.contains('/'));
            assert_eq!(unescape(&e), name);
        }
    }

    #[test]
    fn survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let (l1, l2);
        {
            let s = FileStorage::open(dir.path()).unwrap();
            l1 = s.create_ledger("t/1").unwrap();
            l2 = s.create_ledger("t/2").unwrap();
            for i in 0..100u32 {
                s.append(l1, format!("entry-{i}").as_bytes()).unwrap();
            }
            s.append(l2, b"other").unwrap();
        }
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(s.ledgers("t/1").unwrap(), vec![(l1, 100)]);
        assert_eq!(s.ledgers("t/2").unwrap(), vec![(l2, 1)]);
        let got = s.read(l1, 10, 12).unwrap();
        assert_eq!(got[0].as_slice(), b"entry-10");
        assert_eq!(got[2].as_slice(), b"entry-12");
        assert!(
            s.create_ledger("t/1").unwrap() > l2,
            "ids keep increasing after a reopen"
        );
    }

    #[test]
    fn damage_is_reported_with_the_file_and_spares_other_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, other, path);
        {
            let s = FileStorage::open(dir.path()).unwrap();
            ledger = s.create_ledger("t").unwrap();
            other = s.create_ledger("u").unwrap();
            for i in 0..10u32 {
                s.append(ledger, &[i as u8; 100]).unwrap();
            }
            s.append(other, b"fine").unwrap();
            path = s.segment(ledger).unwrap().lock().path.clone();
        }
        // Flip a byte inside entry 3, and cut the file in the middle of entry 9.
        let mut bytes = fs::read(&path).unwrap();
        let entry3 = HEADER as usize + 3 * 108 + 8 + 50;
        bytes[entry3] ^= 0xff;
        bytes.truncate(bytes.len() - 40);
        fs::write(&path, &bytes).unwrap();

        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(s.ledgers("t").unwrap(), vec![(ledger, 9)]);
        assert_eq!(s.read(ledger, 0, 2).unwrap().len(), 3);
        assert_eq!(s.read(ledger, 4, 8).unwrap().len(), 5);
        let err = s.read(ledger, 3, 3).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("checksum"),
            "{err}"
        );
        let err = s.read(ledger, 8, 9).unwrap_err().to_string();
        assert!(
            err.contains("truncated") && err.contains(&path.display().to_string()),
            "{err}"
        );
        assert!(s.append(ledger, b"x").is_err());
        assert_eq!(s.read(other, 0, 0).unwrap()[0].as_slice(), b"fine");
    }
}
