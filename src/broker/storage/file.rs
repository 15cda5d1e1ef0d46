//! A persistent store: one segment file per ledger, in a directory per managed ledger.
//! `docs/storage.md` is the user's description of the format, the lock, the sync policy and recovery;
//! this comment says why the code is shaped as it is.
//!
//! * Format (version 2): an 8-byte magic `LCSEG2\0\0` (the sixth byte is the format version), then
//!   records `[length u32][payload crc32 u32][header crc32 u32][payload]`, little-endian. The header
//!   checksum covers the length and the payload checksum, so a damaged length is detected where it
//!   is instead of silently cutting the segment short (version 1 had no header checksum). Other
//!   versions are refused at open with an error naming the file and the version.
//! * One writer per directory: a read-write open takes an exclusive `flock` on the directory, a
//!   read-only open a shared one, so two writers never interleave records and a writer never
//!   truncates a tail under a reader. The writer's pid is written to `writer.pid` for the message a
//!   second opener gets.
//! * An append lands whole or not at all: the record is written with one positional write at the
//!   segment's end; if the write (or its fsync) fails, the file is truncated back to the old end
//!   before the error is returned, and until that truncation succeeds no later append is written.
//! * Recovery at open: a tail that is provably an unfinished write (an incomplete header, a payload
//!   that runs past the end of the file, zero bytes left by an OS crash, a 0-byte or short new
//!   segment) is cut off by a read-write open; it was never acknowledged. Anything else that fails
//!   its checks is damage: entries before it stay readable, appends to that ledger are refused, and
//!   reads past it name the file and the byte offset. A read-only open changes nothing on disk.

use super::{check_range, CursorUpdate, DurableCursor, Storage};
use crate::cache::entry::Payload;
use crate::error::{Error, Result};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// The first five bytes of every segment; the sixth is the format version as an ASCII digit.
const MAGIC_PREFIX: &[u8; 5] = b"LCSEG";
const VERSION: u8 = b'2';
const MAGIC: &[u8; 8] = b"LCSEG2\0\0";
const HEADER: u64 = 8;
/// `[length][payload crc][header crc]`.
const RECORD_HEADER: u64 = 12;
/// The largest entry accepted by `append` and believed by the scan: a length above it is damage,
/// whatever its checksum says, so no length read from disk can make us allocate more than this.
pub const MAX_ENTRY_BYTES: u64 = 1 << 30;
/// The file in the store directory that names the process holding the write lock.
const PID_FILE: &str = "writer.pid";

/// When appended data is forced to stable storage (`fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every append (and every new segment, with its directory entry) is synced before it is
    /// acknowledged: an acknowledged entry survives an OS crash or power loss.
    Always,
    /// Nothing is synced: an acknowledged entry survives the process being killed (it is in the
    /// OS's page cache), but an OS crash may lose the most recent entries; recovery then keeps
    /// every complete record that reached the disk. The default: the store backs a cache and a lab
    /// whose logs can be regenerated, and an fsync per entry costs milliseconds on most disks.
    #[default]
    Never,
}

impl SyncPolicy {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "always" => Ok(SyncPolicy::Always),
            "never" => Ok(SyncPolicy::Never),
            other => Err(Error::invalid(
                "sync",
                format!("{other:?} is not a sync policy; use \"always\" or \"never\""),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SyncPolicy::Always => "always",
            SyncPolicy::Never => "never",
        }
    }
}

/// How [`FileStorage::open_with`] opens a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOptions {
    /// Create the directory if it does not exist (otherwise a missing directory is an error).
    pub create: bool,
    /// Open for reading only: files are opened read-only, nothing on disk changes, several
    /// processes may read at once, and `create_ledger`/`append`/`delete_ledger` are refused.
    pub read_only: bool,
    pub sync: SyncPolicy,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            create: true,
            read_only: false,
            sync: SyncPolicy::default(),
        }
    }
}

/// A fault the unit tests inject into the next append or segment creation.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The write stores this many bytes of the record, then fails as a full disk would.
    WriteFailsAfter(usize),
    /// The write lands but the fsync after it fails.
    SyncFails,
}

struct Segment {
    owner: String,
    path: PathBuf,
    file: File,
    /// (offset of the record, payload length) per readable entry.
    records: Vec<(u64, u32)>,
    /// Where the next record goes: the end of the last complete record.
    end: u64,
    /// Where the readable part ends early because of damage, and why.
    damaged: Option<(u64, String)>,
    /// A failed append left bytes past `end` that could not be truncated yet.
    dirty_tail: bool,
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

/// What recovery did to one segment at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub path: PathBuf,
    /// The length the segment was cut back to.
    pub offset: u64,
    pub reason: String,
}

/// Ledgers stored as segment files under a directory.
pub struct FileStorage {
    dir: PathBuf,
    options: FileOptions,
    next_id: AtomicI64,
    segments: RwLock<BTreeMap<i64, Arc<Mutex<Segment>>>>,
    recovered: Vec<Recovered>,
    /// The directory, held open for its `flock`; released by `close` or when the store is dropped
    /// (Python's garbage collector may drop it late, hence `close`).
    lock: Mutex<Option<File>>,
    closed: AtomicBool,
    /// Each managed ledger's cursor log (see `cursors`), or the damage that stops it loading.
    cursor_logs: Mutex<BTreeMap<String, Result<cursors::CursorLog>>>,
    #[cfg(test)]
    fault: Mutex<Option<Fault>>,
    /// How many of the next truncations (undoing a failed append) fail.
    #[cfg(test)]
    failing_truncates: std::sync::atomic::AtomicU32,
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
            if let Some(b) = dir
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
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

fn io_err(path: &Path, what: &str, e: io::Error) -> Error {
    Error::storage(format!("{what} {}", path.display()), e)
}

/// The header of a record holding `data`.
fn record_header(data: &[u8]) -> [u8; RECORD_HEADER as usize] {
    let mut h = [0u8; RECORD_HEADER as usize];
    h[..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&crc32fast::hash(data).to_le_bytes());
    let hcrc = crc32fast::hash(&h[..8]);
    h[8..].copy_from_slice(&hcrc.to_le_bytes());
    h
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Takes the directory's lock: exclusive for a writer, shared for a reader; never waits.
fn lock_dir(dir: &Path, read_only: bool) -> Result<File> {
    let handle = File::open(dir).map_err(|e| io_err(dir, "cannot open", e))?;
    let op = if read_only {
        libc::LOCK_SH
    } else {
        libc::LOCK_EX
    };
    if flock(&handle, op)? {
        return Ok(handle);
    }
    // Held elsewhere. A shared lock succeeding now means only readers hold it; otherwise a
    // writer does, and it wrote its pid (the lock is released when a process dies, so a pid file
    // read while the lock is held is current).
    let probe = File::open(dir).map_err(|e| io_err(dir, "cannot open", e))?;
    let holder = if !read_only && flock(&probe, libc::LOCK_SH)? {
        "it is open for reading by another FileStorage (in this or another process)".to_string()
    } else {
        let pid = fs::read_to_string(dir.join(PID_FILE)).unwrap_or_default();
        match pid.trim().parse::<u32>() {
            Ok(pid) => format!("it is open for writing by another FileStorage (process {pid})"),
            Err(_) => "it is open for writing by another FileStorage".to_string(),
        }
    };
    Err(Error::Storage(format!(
        "storage directory {} is locked: {holder}",
        dir.display()
    )))
}

/// `flock(op | LOCK_NB)`; `Ok(false)` when another open file holds a conflicting lock.
fn flock(file: &File, op: libc::c_int) -> Result<bool> {
    loop {
        // SAFETY: flock takes a file descriptor we own (kept open by `file`) and plain flags.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock => return Ok(false),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(Error::storage("cannot lock the storage directory", err)),
        }
    }
}

/// Syncs a directory so that entries created or removed in it survive an OS crash.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, "cannot sync", e))
}

/// How a segment's bytes end.
enum Tail {
    /// The last record ends at the end of the file.
    Clean,
    /// An unfinished write from `offset` on: never acknowledged, safe to cut off.
    Torn(u64, String),
    /// Damage from `offset` on: not a crash's signature; kept, and reported.
    Corrupt(u64, String),
}

/// Whether every byte of `file` from `from` to `len` is zero (an OS crash can leave a file's
/// length extended over blocks whose data never reached the disk). Reads in bounded chunks.
fn zero_from(file: &File, path: &Path, from: u64, len: u64) -> Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = from;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| io_err(path, "cannot read", e))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Indexes a segment's records from its bytes: the complete records, and how the file ends.
fn scan(file: &File, path: &Path) -> Result<(Vec<(u64, u32)>, Tail)> {
    let len = file
        .metadata()
        .map_err(|e| io_err(path, "cannot stat", e))?
        .len();
    let mut magic = [0u8; HEADER as usize];
    let have = len.min(HEADER) as usize;
    file.read_exact_at(&mut magic[..have], 0)
        .map_err(|e| io_err(path, "cannot read", e))?;
    if have < HEADER as usize {
        // A crash between creating the file and writing its magic (or part of it).
        return Ok(
            if MAGIC.starts_with(&magic[..have]) || zero_from(file, path, 0, len)? {
                (
                    Vec::new(),
                    Tail::Torn(0, format!("new segment has {have} of 8 header bytes")),
                )
            } else {
                (
                    Vec::new(),
                    Tail::Corrupt(0, "not a ledgercache segment (bad magic)".into()),
                )
            },
        );
    }
    if &magic[..5] != MAGIC_PREFIX {
        if zero_from(file, path, 0, len)? {
            return Ok((
                Vec::new(),
                Tail::Torn(0, "segment holds only zero bytes".into()),
            ));
        }
        return Ok((
            Vec::new(),
            Tail::Corrupt(0, "not a ledgercache segment (bad magic)".into()),
        ));
    }
    if magic[5] != VERSION {
        // Another format (or a damaged version byte): refused by name and left untouched, while
        // the store's other segments stay usable.
        return Ok((
            Vec::new(),
            Tail::Corrupt(
                5,
                format!(
                    "segment format version {:?} is not supported (this ledgercache reads version {:?})",
                    magic[5] as char, VERSION as char
                ),
            ),
        ));
    }
    if magic[6..] != MAGIC[6..] {
        return Ok((
            Vec::new(),
            Tail::Corrupt(6, "not a ledgercache segment (bad magic)".into()),
        ));
    }
    let mut records = Vec::new();
    let mut offset = HEADER;
    let mut header = [0u8; RECORD_HEADER as usize];
    while offset < len {
        let left = len - offset;
        if left < RECORD_HEADER {
            return Ok((
                records,
                Tail::Torn(
                    offset,
                    format!("incomplete record header ({left} of 12 bytes)"),
                ),
            ));
        }
        file.read_exact_at(&mut header, offset)
            .map_err(|e| io_err(path, "cannot read", e))?;
        let n = le32(&header[..4]);
        if crc32fast::hash(&header[..8]) != le32(&header[8..]) {
            if zero_from(file, path, offset, len)? {
                return Ok((records, Tail::Torn(offset, "zero-filled tail".into())));
            }
            return Ok((
                records,
                Tail::Corrupt(
                    offset,
                    "record header checksum mismatch (its length or checksum is damaged)".into(),
                ),
            ));
        }
        if n as u64 > MAX_ENTRY_BYTES {
            return Ok((
                records,
                Tail::Corrupt(offset, format!("record length {n} is over the limit")),
            ));
        }
        let next = offset + RECORD_HEADER + n as u64;
        if next > len {
            return Ok((
                records,
                Tail::Torn(
                    offset,
                    format!(
                        "truncated record ({} of {n} payload bytes)",
                        left - RECORD_HEADER
                    ),
                ),
            ));
        }
        records.push((offset, n));
        offset = next;
    }
    Ok((records, Tail::Clean))
}

impl FileStorage {
    /// Opens (creating if needed) a store in `dir` for reading and writing, indexing the segments
    /// already there, with the default sync policy.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, FileOptions::default())
    }

    /// Opens a store in `dir` as `options` say. A read-write open recovers torn tails (see the
    /// module comment); [`FileStorage::recovered`] lists what it cut.
    pub fn open_with(dir: impl AsRef<Path>, options: FileOptions) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        if options.create && !options.read_only {
            fs::create_dir_all(&dir).map_err(|e| io_err(&dir, "cannot create", e))?;
        } else if !dir.is_dir() {
            return Err(Error::Storage(format!(
                "storage directory {} does not exist (or is not a directory), and this open does not create it",
                dir.display()
            )));
        }
        let lock = lock_dir(&dir, options.read_only)?;
        if !options.read_only {
            let pid_path = dir.join(PID_FILE);
            fs::write(&pid_path, format!("{}\n", std::process::id()))
                .map_err(|e| io_err(&pid_path, "cannot write", e))?;
        }
        let mut segments = BTreeMap::new();
        let mut recovered = Vec::new();
        let mut cursor_logs = BTreeMap::new();
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
                let seg = Self::load(owner.clone(), path, options, &mut recovered)?;
                segments.insert(id, Arc::new(Mutex::new(seg)));
            }
            let log = cursors::CursorLog::load(&owner_dir, options, &mut recovered);
            cursor_logs.insert(owner, log);
        }
        let next_id = max_id.checked_add(1).ok_or_else(|| {
            Error::Storage(format!("{}: ledger ids are exhausted", dir.display()))
        })?;
        Ok(FileStorage {
            dir,
            options,
            next_id: AtomicI64::new(next_id),
            segments: RwLock::new(segments),
            recovered,
            lock: Mutex::new(Some(lock)),
            closed: AtomicBool::new(false),
            cursor_logs: Mutex::new(cursor_logs),
            #[cfg(test)]
            fault: Mutex::new(None),
            #[cfg(test)]
            failing_truncates: Default::default(),
        })
    }

    /// Opens one segment, and (read-write) cuts a torn tail.
    fn load(
        owner: String,
        path: PathBuf,
        options: FileOptions,
        recovered: &mut Vec<Recovered>,
    ) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(!options.read_only)
            .open(&path)
            .map_err(|e| io_err(&path, "cannot open", e))?;
        let (records, tail) = scan(&file, &path)?;
        let mut seg = Segment {
            owner,
            path,
            file,
            end: records
                .last()
                .map_or(HEADER, |&(o, n)| o + RECORD_HEADER + n as u64),
            records,
            damaged: None,
            dirty_tail: false,
        };
        match tail {
            Tail::Clean => {}
            Tail::Corrupt(offset, reason) => {
                seg.damaged = Some((offset, reason));
            }
            Tail::Torn(offset, reason) if options.read_only => {
                // Nothing changes on disk; the unfinished record is simply not an entry.
                let _ = (offset, reason);
            }
            Tail::Torn(offset, reason) => {
                let cut = |e| io_err(&seg.path, "cannot truncate", e);
                seg.file.set_len(offset).map_err(cut)?;
                if offset == 0 {
                    seg.file
                        .write_all_at(MAGIC, 0)
                        .map_err(|e| io_err(&seg.path, "cannot write", e))?;
                }
                if options.sync == SyncPolicy::Always {
                    seg.file
                        .sync_all()
                        .map_err(|e| io_err(&seg.path, "cannot sync", e))?;
                }
                recovered.push(Recovered {
                    path: seg.path.clone(),
                    offset: offset.max(HEADER),
                    reason,
                });
            }
        }
        Ok(seg)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> FileOptions {
        self.options
    }

    /// The torn tails the open cut off (a read-write open only): unacknowledged writes of a
    /// process that was killed, or lost to an OS crash.
    pub fn recovered(&self) -> &[Recovered] {
        &self.recovered
    }

    /// Segments whose readable part ends early because of damage: (ledger id, file, offset, why).
    pub fn damaged(&self) -> Vec<(i64, PathBuf, u64, String)> {
        self.segments
            .read()
            .iter()
            .filter_map(|(id, s)| {
                let s = s.lock();
                s.damaged
                    .as_ref()
                    .map(|(o, r)| (*id, s.path.clone(), *o, r.clone()))
            })
            .collect()
    }

    /// Closes the store: its segment files and its directory lock are released at once, and every
    /// later operation raises `Closed`. Closing twice does nothing.
    pub fn close(&self) {
        let mut lock = self.lock.lock();
        self.closed.store(true, Ordering::Release);
        // Wait for appends in flight (they hold their segment's mutex and check `closed` under it),
        // and drop the files before the lock: once it goes, another process may open the directory
        // for writing.
        let segments = std::mem::take(&mut *self.segments.write());
        for seg in segments.values() {
            drop(seg.lock());
        }
        drop(segments);
        self.cursor_logs.lock().clear();
        lock.take();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn open_check(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed(self.describe()));
        }
        Ok(())
    }

    fn segment(&self, ledger_id: i64) -> Result<Arc<Mutex<Segment>>> {
        self.open_check()?;
        self.segments
            .read()
            .get(&ledger_id)
            .cloned()
            .ok_or_else(|| Error::not_found("ledger", ledger_id))
    }

    fn writable(&self, what: &str) -> Result<()> {
        self.open_check()?;
        if self.options.read_only {
            return Err(Error::Unsupported(format!(
                "{} was opened read-only: it cannot {what}",
                self.describe()
            )));
        }
        Ok(())
    }

    /// Writes `bytes` at `at` in `file`, then syncs if the policy says so. The unit tests' faults
    /// act here, on real files, so the rollback they check is the one real failures get.
    fn write_durably(&self, file: &File, bytes: &[u8], at: u64) -> io::Result<()> {
        #[cfg(test)]
        let fault = self.fault.lock().take();
        #[cfg(test)]
        if let Some(Fault::WriteFailsAfter(n)) = fault {
            file.write_all_at(&bytes[..n.min(bytes.len())], at)?;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "injected: disk full",
            ));
        }
        file.write_all_at(bytes, at)?;
        if self.options.sync == SyncPolicy::Always {
            // Injected where the real sync is, so a test sees which policy syncs.
            #[cfg(test)]
            if let Some(Fault::SyncFails) = fault {
                return Err(io::Error::other("injected: fsync failed"));
            }
            file.sync_data()?;
        }
        Ok(())
    }

    /// Cuts a segment back to its last complete record after a failed append.
    fn truncate_back(&self, seg: &mut Segment) -> io::Result<()> {
        #[cfg(test)]
        if self
            .failing_truncates
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(io::Error::other("injected: truncate failed"));
        }
        seg.file.set_len(seg.end)?;
        if self.options.sync == SyncPolicy::Always {
            seg.file.sync_data()?;
        }
        Ok(())
    }
}

impl Storage for FileStorage {
    fn create_ledger(&self, owner: &str) -> Result<i64> {
        self.writable("create ledgers")?;
        let id = self.next_id.fetch_add(1, Ordering::AcqRel);
        let owner_dir = self.dir.join(escape(owner));
        let new_dir = !owner_dir.is_dir();
        fs::create_dir_all(&owner_dir).map_err(|e| io_err(&owner_dir, "cannot create", e))?;
        let path = owner_dir.join(format!("{id}.seg"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, "cannot create", e))?;
        if let Err(e) = self.write_durably(&file, MAGIC, 0) {
            // A segment without its magic would be recovered at the next open anyway; removing it
            // now keeps this process's view and the disk the same.
            let _ = fs::remove_file(&path);
            return Err(io_err(&path, "cannot write", e));
        }
        if self.options.sync == SyncPolicy::Always {
            // The new file's name (and a new owner directory's) must be durable too.
            sync_dir(&owner_dir)?;
            if new_dir {
                sync_dir(&self.dir)?;
            }
        }
        let seg = Segment {
            owner: owner.to_string(),
            path,
            file,
            records: Vec::new(),
            end: HEADER,
            damaged: None,
            dirty_tail: false,
        };
        let mut segments = self.segments.write();
        if self.is_closed() {
            // Closed while the file was being created: `close` has already let go of the lock.
            drop(segments);
            let _ = fs::remove_file(&seg.path);
            return Err(Error::Closed(self.describe()));
        }
        segments.insert(id, Arc::new(Mutex::new(seg)));
        Ok(id)
    }

    fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>> {
        self.open_check()?;
        let segments = self.segments.read();
        Ok(segments
            .iter()
            .filter_map(|(id, s)| {
                let s = s.lock();
                // A damaged segment counts one entry past its readable ones: the damage itself
                // (bytes that are not a torn write, so at least one entry was there). Readers then
                // reach it and get the error instead of moving on as if the ledger ended there.
                let count = s.records.len() as u64 + u64::from(s.damaged.is_some());
                (s.owner == owner).then_some((*id, count))
            })
            .collect())
    }

    fn append(&self, ledger_id: i64, data: &[u8]) -> Result<i64> {
        self.writable("append")?;
        if data.len() as u64 > MAX_ENTRY_BYTES {
            return Err(Error::invalid(
                "data",
                format!(
                    "{} bytes is more than an entry can hold ({MAX_ENTRY_BYTES})",
                    data.len()
                ),
            ));
        }
        let seg = self.segment(ledger_id)?;
        let mut seg = seg.lock();
        self.open_check()?;
        if let Some((offset, reason)) = &seg.damaged {
            return Err(seg.corrupt(*offset, format!("{reason}; refusing to append after it")));
        }
        if seg.dirty_tail {
            self.truncate_back(&mut seg)
                .map_err(|e| io_err(&seg.path, "cannot undo an earlier failed append in", e))?;
            seg.dirty_tail = false;
        }
        let mut record = Vec::with_capacity(RECORD_HEADER as usize + data.len());
        record.extend_from_slice(&record_header(data));
        record.extend_from_slice(data);
        let at = seg.end;
        if let Err(e) = self.write_durably(&seg.file, &record, at) {
            // Undo whatever part landed, so the next record starts at a record boundary; if even
            // that fails, no record is written until it succeeds (see `dirty_tail`).
            if self.truncate_back(&mut seg).is_err() {
                seg.dirty_tail = true;
            }
            return Err(io_err(&seg.path, "cannot write", e));
        }
        seg.records.push((at, data.len() as u32));
        seg.end = at + record.len() as u64;
        Ok(seg.records.len() as i64 - 1)
    }

    fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>> {
        let seg = self.segment(ledger_id)?;
        let seg = seg.lock();
        let count = seg.records.len() as u64;
        let mut last = last;
        if last >= 0 && last as u64 >= count {
            if let Some((offset, reason)) = &seg.damaged {
                if first < 0 || first as u64 >= count {
                    return Err(seg.corrupt(
                        *offset,
                        format!("{reason}; entry {count} and later are unreadable"),
                    ));
                }
                // The entries before the damage (see `Storage::read`).
                last = count as i64 - 1;
            }
        }
        check_range(ledger_id, first, last, count)?;
        let (start, _) = seg.records[first as usize];
        let (last_off, last_len) = seg.records[last as usize];
        // Bounded by the file's length: every indexed record was checked to lie inside it.
        let span_end = last_off + RECORD_HEADER + last_len as u64;
        let mut buf = vec![0u8; (span_end - start) as usize];
        seg.file
            .read_exact_at(&mut buf, start)
            .map_err(|e| io_err(&seg.path, "cannot read", e))?;
        let buf = Bytes::from(buf);
        let mut out = Vec::with_capacity((last - first + 1) as usize);
        for &(offset, n) in &seg.records[first as usize..=last as usize] {
            let at = (offset - start) as usize;
            let header = &buf[at..at + RECORD_HEADER as usize];
            let data =
                buf.slice(at + RECORD_HEADER as usize..at + RECORD_HEADER as usize + n as usize);
            // The header is checked again: the file may have changed since the open scanned it.
            let damage = if crc32fast::hash(&header[..8]) != le32(&header[8..]) || le32(header) != n
            {
                Some("record header checksum mismatch")
            } else if crc32fast::hash(&data) != le32(&header[4..8]) {
                Some("payload checksum mismatch")
            } else {
                None
            };
            if let Some(reason) = damage {
                // The entries before the damaged one are delivered (see `Storage::read`); a read
                // that starts at it gets the error, naming the file and the offset.
                if out.is_empty() {
                    return Err(seg.corrupt(offset, reason));
                }
                break;
            }
            out.push(Payload::from(data));
        }
        Ok(out)
    }

    fn delete_ledger(&self, ledger_id: i64) -> Result<()> {
        self.writable("delete ledgers")?;
        let seg = self
            .segments
            .write()
            .remove(&ledger_id)
            .ok_or_else(|| Error::not_found("ledger", ledger_id))?;
        let seg = seg.lock();
        fs::remove_file(&seg.path).map_err(|e| io_err(&seg.path, "cannot delete", e))?;
        if self.options.sync == SyncPolicy::Always {
            if let Some(parent) = seg.path.parent() {
                sync_dir(parent)?;
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("FileStorage({})", self.dir.display())
    }

    fn keeps_cursors(&self) -> bool {
        !self.options.read_only
    }

    fn persist_cursor(&self, owner: &str, update: &CursorUpdate<'_>) -> Result<()> {
        self.persist_cursor_change(owner, update)
    }

    fn load_cursors(&self, owner: &str) -> Result<Vec<DurableCursor>> {
        self.load_cursor_log(owner)
    }
}

mod cursors;
#[cfg(test)]
mod tests;
