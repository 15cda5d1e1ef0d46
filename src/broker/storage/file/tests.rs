//! FileStorage unit tests: these can inject faults into real writes (see `Fault`).

use super::*;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use std::io::Write;

fn entry(i: usize) -> Vec<u8> {
    format!("entry-{i}-{}", "x".repeat(i % 7)).into_bytes()
}

fn seg_path(s: &FileStorage, ledger: i64) -> PathBuf {
    s.segment(ledger).unwrap().lock().path.clone()
}

fn all(s: &FileStorage, ledger: i64) -> Vec<Vec<u8>> {
    let n = s.segment(ledger).unwrap().lock().records.len() as i64;
    if n == 0 {
        return Vec::new();
    }
    s.read(ledger, 0, n - 1)
        .unwrap()
        .iter()
        .map(|p| p.as_slice().to_vec())
        .collect()
}

/// A store with one ledger of `n` entries, closed again; returns (ledger, segment path).
fn small_store(dir: &Path, n: usize) -> (i64, PathBuf) {
    let s = FileStorage::open(dir).unwrap();
    let l = s.create_ledger("t").unwrap();
    for i in 0..n {
        s.append(l, &entry(i)).unwrap();
    }
    (l, seg_path(&s, l))
}

#[test]
fn owner_names_round_trip_through_directory_names() {
    for name in [
        "persistent://public/default/orders",
        "a b%c",
        "plain-name_1.x",
        "%zz%4",
        "é%",
    ] {
        let e = escape(name);
        assert!(!e.contains('/'));
        assert_eq!(unescape(&e), name);
    }
    // Directory names nobody escaped must not panic (a multi-byte character after '%').
    assert_eq!(unescape("%é1"), "%é1");
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
    assert!(s.recovered().is_empty());
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
fn damage_is_reported_and_a_torn_tail_is_recovered() {
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
        path = seg_path(&s, ledger);
    }
    // Flip a byte inside entry 3's payload, and cut the file in the middle of entry 9.
    let mut bytes = fs::read(&path).unwrap();
    let entry3 = (HEADER + 3 * 112 + RECORD_HEADER + 50) as usize;
    bytes[entry3] ^= 0xff;
    bytes.truncate(bytes.len() - 40);
    fs::write(&path, &bytes).unwrap();

    let s = FileStorage::open(dir.path()).unwrap();
    assert_eq!(s.ledgers("t").unwrap(), vec![(ledger, 9)]);
    assert_eq!(s.recovered().len(), 1, "{:?}", s.recovered());
    assert_eq!(s.recovered()[0].offset, HEADER + 9 * 112);
    assert_eq!(fs::metadata(&path).unwrap().len(), HEADER + 9 * 112);
    assert_eq!(s.read(ledger, 0, 2).unwrap().len(), 3);
    assert_eq!(s.read(ledger, 4, 8).unwrap().len(), 5);
    let err = s.read(ledger, 3, 3).unwrap_err();
    assert_eq!(
        err,
        Error::CorruptSegment {
            file: path.display().to_string(),
            offset: HEADER + 3 * 112,
            reason: "payload checksum mismatch".into()
        }
    );
    // A read across the damaged entry delivers the entries before it; one starting at it fails.
    assert_eq!(s.read(ledger, 0, 8).unwrap().len(), 3);
    assert!(matches!(
        s.read(ledger, 3, 8),
        Err(Error::CorruptSegment { .. })
    ));
    // The torn entry was never acknowledged: appends continue where the complete records end.
    assert_eq!(s.append(ledger, b"x").unwrap(), 9);
    assert_eq!(s.read(other, 0, 0).unwrap()[0].as_slice(), b"fine");
}

/// Every way a write can fail part-way: the append reports the error, the file is as it was, the
/// next append lands, and a reopen finds exactly the acknowledged entries.
#[test]
fn a_failed_append_leaves_the_store_as_it_was() {
    let record_len = RECORD_HEADER as usize + entry(5).len();
    let mut faults: Vec<(Option<Fault>, u32)> = (0..=record_len)
        .map(|n| (Some(Fault::WriteFailsAfter(n)), 0))
        .collect();
    faults.push((Some(Fault::WriteFailsAfter(7)), 1));
    faults.push((Some(Fault::WriteFailsAfter(record_len)), 2));
    for sync in [SyncPolicy::Never, SyncPolicy::Always] {
        for &(fault, failing_truncates) in &faults {
            let dir = tempfile::tempdir().unwrap();
            let options = FileOptions {
                sync,
                ..Default::default()
            };
            let (l, path) = {
                let s = FileStorage::open_with(dir.path(), options).unwrap();
                let l = s.create_ledger("t").unwrap();
                for i in 0..5 {
                    s.append(l, &entry(i)).unwrap();
                }
                let len = fs::metadata(seg_path(&s, l)).unwrap().len();
                *s.fault.lock() = fault;
                s.failing_truncates
                    .store(failing_truncates, Ordering::Release);
                let err = s.append(l, &entry(5)).unwrap_err();
                assert!(
                    matches!(&err, Error::Storage(m) if m.contains(&seg_path(&s, l).display().to_string())),
                    "{err}"
                );
                if failing_truncates == 0 {
                    assert_eq!(
                        fs::metadata(seg_path(&s, l)).unwrap().len(),
                        len,
                        "{fault:?}"
                    );
                }
                for _ in 1..failing_truncates {
                    // Each retry first tries to undo the torn bytes; while it cannot, it writes nothing.
                    assert!(s.append(l, b"refused").is_err());
                }
                assert_eq!(s.append(l, &entry(6)).unwrap(), 5, "{fault:?}");
                assert_eq!(all(&s, l).last().unwrap(), &entry(6));
                (l, seg_path(&s, l))
            };
            let s = FileStorage::open_with(dir.path(), options).unwrap();
            assert!(s.recovered().is_empty(), "{fault:?}: {:?}", s.recovered());
            let want: Vec<_> = (0..5).map(entry).chain([entry(6)]).collect();
            assert_eq!(all(&s, l), want, "{fault:?} {sync:?} {}", path.display());
        }
    }
}

/// `sync="always"` syncs each append before acknowledging it, and a failed sync fails the append
/// and undoes it; `sync="never"` does not sync (the same injected fault never fires).
#[test]
fn sync_always_syncs_each_append_and_undoes_one_whose_sync_fails() {
    for sync in [SyncPolicy::Always, SyncPolicy::Never] {
        let dir = tempfile::tempdir().unwrap();
        let options = FileOptions {
            sync,
            ..Default::default()
        };
        let s = FileStorage::open_with(dir.path(), options).unwrap();
        let l = s.create_ledger("t").unwrap();
        s.append(l, b"first").unwrap();
        let len = fs::metadata(seg_path(&s, l)).unwrap().len();
        *s.fault.lock() = Some(Fault::SyncFails);
        let result = s.append(l, b"second");
        if sync == SyncPolicy::Always {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("fsync failed"), "{err}");
            assert_eq!(fs::metadata(seg_path(&s, l)).unwrap().len(), len);
            assert_eq!(all(&s, l), vec![b"first".to_vec()]);
        } else {
            assert_eq!(result.unwrap(), 1);
        }
        drop(s);
        let s = FileStorage::open_with(dir.path(), options).unwrap();
        assert!(s.recovered().is_empty());
        assert_eq!(
            all(&s, l).len(),
            if sync == SyncPolicy::Always { 1 } else { 2 }
        );
    }
}

#[test]
fn a_failed_segment_creation_leaves_no_segment() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    *s.fault.lock() = Some(Fault::WriteFailsAfter(3));
    assert!(s.create_ledger("t").is_err());
    assert!(s.ledgers("t").unwrap().is_empty());
    let l = s.create_ledger("t").unwrap();
    s.append(l, b"a").unwrap();
    drop(s);
    let s = FileStorage::open(dir.path()).unwrap();
    assert_eq!(s.ledgers("t").unwrap(), vec![(l, 1)]);
}

/// A crash while a segment was being created leaves it 0 bytes or with part of its magic: the
/// ledger is empty and appends to it work (they failed forever before recovery existed).
#[test]
fn a_short_new_segment_is_recovered_as_an_empty_ledger() {
    for len in 0..HEADER {
        let dir = tempfile::tempdir().unwrap();
        let (l, path) = small_store(dir.path(), 0);
        fs::write(&path, &MAGIC[..len as usize]).unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(s.ledgers("t").unwrap(), vec![(l, 0)]);
        assert_eq!(s.recovered().len(), 1);
        assert_eq!(s.append(l, b"after").unwrap(), 0);
        drop(s);
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(all(&s, l), vec![b"after".to_vec()]);
    }
}

/// Cut the store at every byte: the complete records before the cut are kept, the rest is a torn
/// tail that a read-write open cuts off, and appends continue.
#[test]
fn truncation_at_every_offset_keeps_every_complete_record() {
    let dir = tempfile::tempdir().unwrap();
    let (l, path) = small_store(dir.path(), 6);
    let full = fs::read(&path).unwrap();
    let mut ends = vec![HEADER];
    for i in 0..6 {
        ends.push(ends[i] + RECORD_HEADER + entry(i).len() as u64);
    }
    for cut in 0..=full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let complete = ends
            .iter()
            .filter(|&&e| e <= cut as u64)
            .count()
            .saturating_sub(1);
        {
            let ro = FileStorage::open_with(
                dir.path(),
                FileOptions {
                    read_only: true,
                    create: false,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(
                ro.ledgers("t").unwrap(),
                vec![(l, complete as u64)],
                "cut {cut}"
            );
            assert_eq!(
                fs::read(&path).unwrap(),
                &full[..cut],
                "read-only changes nothing"
            );
        }
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(
            s.ledgers("t").unwrap(),
            vec![(l, complete as u64)],
            "cut {cut}"
        );
        let want: Vec<_> = (0..complete).map(entry).collect();
        assert_eq!(all(&s, l), want, "cut {cut}");
        assert_eq!(
            s.recovered().is_empty(),
            ends.contains(&(cut as u64)),
            "cut {cut}"
        );
        assert_eq!(s.append(l, b"next").unwrap(), complete as i64);
        drop(s);
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(all(&s, l).len(), complete + 1);
    }
}

/// Flip each byte of a small store in turn: no read ever returns wrong data, every damage is
/// reported with the file and an offset, the entries before the damaged record stay readable,
/// and a damaged length never silently ends the segment.
#[test]
fn a_flipped_byte_anywhere_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (l, path) = small_store(dir.path(), 5);
    let full = fs::read(&path).unwrap();
    let mut starts = vec![HEADER];
    for i in 0..5 {
        starts.push(starts[i] + RECORD_HEADER + entry(i).len() as u64);
    }
    for at in 0..full.len() {
        let mut bytes = full.clone();
        bytes[at] ^= 0x5a;
        fs::write(&path, &bytes).unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        assert!(
            s.recovered().is_empty(),
            "byte {at}: a flip is not a torn tail"
        );
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes,
            "byte {at}: damage is never cut off"
        );
        let damaged_record = starts.iter().rposition(|&s| s <= at as u64);
        // A damaged segment counts the damaged entry too, so that readers reach the error.
        let count = s.ledgers("t").unwrap()[0].1 as usize - s.damaged().len();
        for i in 0..5 {
            match s.read(l, i as i64, i as i64) {
                Ok(got) => assert_eq!(got[0].as_slice(), entry(i), "byte {at}, entry {i}"),
                Err(Error::CorruptSegment { file, offset, .. }) => {
                    assert_eq!(file, path.display().to_string());
                    assert!(offset <= at as u64, "byte {at}: reported at {offset}");
                    assert!(
                        damaged_record.is_none_or(|r| i >= r),
                        "byte {at}: entry {i} before the damage must stay readable"
                    );
                }
                Err(e) => panic!("byte {at}, entry {i}: {e}"),
            }
        }
        if at >= HEADER as usize {
            let record = damaged_record.unwrap();
            // Entries before the damaged record are indexed; a damaged header is reported.
            assert!(count >= record, "byte {at}");
            if count < 5 {
                assert!(
                    s.damaged()
                        .iter()
                        .any(|(id, p, _, _)| *id == l && *p == path),
                    "byte {at}: the rest of the segment was dropped silently"
                );
                assert!(s.append(l, b"x").is_err(), "byte {at}: append after damage");
                let err = s.read(l, 0, count as i64);
                if count > 0 {
                    assert_eq!(
                        err.unwrap().len(),
                        count,
                        "byte {at}: the entries before it"
                    );
                }
                assert!(
                    matches!(
                        s.read(l, count as i64, count as i64),
                        Err(Error::CorruptSegment { .. })
                    ),
                    "byte {at}: reading the damaged entry"
                );
            }
        } else {
            assert_eq!(count, 0, "byte {at}: a damaged magic");
            assert_eq!(s.damaged().len(), 1, "byte {at}");
        }
    }
}

#[test]
fn unknown_versions_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (l, path) = small_store(dir.path(), 2);
    let mut bytes = fs::read(&path).unwrap();
    bytes[5] = b'9';
    fs::write(&path, &bytes).unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    let err = s.read(l, 0, 0).unwrap_err().to_string();
    assert!(
        err.contains("version '9'") && err.contains(&path.display().to_string()),
        "{err}"
    );
    assert!(s.append(l, b"x").is_err());
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "an unknown version is not touched"
    );
}

#[test]
fn one_writer_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    let err = FileStorage::open(dir.path())
        .err()
        .expect("locked")
        .to_string();
    assert!(
        err.contains(&dir.path().display().to_string())
            && err.contains(&format!("process {}", std::process::id())),
        "{err}"
    );
    let ro = FileOptions {
        read_only: true,
        ..Default::default()
    };
    assert!(
        FileStorage::open_with(dir.path(), ro).is_err(),
        "a reader waits for the writer to close"
    );
    drop(s);
    let r1 = FileStorage::open_with(dir.path(), ro).unwrap();
    let _r2 = FileStorage::open_with(dir.path(), ro).unwrap();
    let err = FileStorage::open(dir.path())
        .err()
        .expect("locked")
        .to_string();
    assert!(err.contains("open for reading"), "{err}");
    assert!(matches!(r1.create_ledger("t"), Err(Error::Unsupported(_))));
}

#[test]
fn create_false_does_not_create_a_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-here");
    for read_only in [false, true] {
        let err = FileStorage::open_with(
            &missing,
            FileOptions {
                create: false,
                read_only,
                ..Default::default()
            },
        )
        .err()
        .expect("a missing directory is an error");
        assert!(
            matches!(&err, Error::Storage(m) if m.contains(&missing.display().to_string())),
            "{err}"
        );
        assert!(!missing.exists());
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A store whose files and directory are read-only opens for reading. As root, permissions do
/// not stop writes, so only the read-only open's own promises (nothing written) are checked.
#[test]
fn read_only_stores_open_for_reading() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (l, path) = small_store(dir.path(), 3);
    // A torn tail that a read-only open must leave alone.
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&[1, 2, 3]);
    fs::write(&path, &bytes).unwrap();
    let chmod = |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    chmod(&path, 0o444);
    chmod(path.parent().unwrap(), 0o555);
    chmod(dir.path(), 0o555);
    let ro = FileOptions {
        read_only: true,
        create: false,
        ..Default::default()
    };
    {
        let s = FileStorage::open_with(dir.path(), ro).unwrap();
        assert_eq!(all(&s, l), (0..3).map(entry).collect::<Vec<_>>());
        assert!(matches!(s.append(l, b"x"), Err(Error::Unsupported(_))));
        assert!(matches!(s.delete_ledger(l), Err(Error::Unsupported(_))));
    }
    assert_eq!(fs::read(&path).unwrap(), bytes);
    if is_root() {
        println!("skipped: running as root, permissions do not stop a read-write open");
    } else {
        let err = FileStorage::open(dir.path())
            .err()
            .expect("cannot write")
            .to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }
    chmod(dir.path(), 0o755);
    chmod(path.parent().unwrap(), 0o755);
    chmod(&path, 0o644);
}

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    /// An append whose write stops after this share (per mille) of the record, then fails.
    FailedAppend(u16),
    /// The process dies mid-append: this share of a record reaches the file, then a reopen.
    Crash(u16),
    Reopen,
    NewLedger,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..300).prop_map(Op::Append),
        1 => (0u16..1000).prop_map(Op::FailedAppend),
        1 => (0u16..1000).prop_map(Op::Crash),
        1 => Just(Op::Reopen),
        1 => Just(Op::NewLedger),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Fixed: CI runs the same cases every time (PROPTEST_RNG_SEED does not override a
        // fixed seed; change it here to explore).
        rng_seed: RngSeed::Fixed(20261123),
        ..ProptestConfig::default()
    })]

    /// Random appends, failed appends, crashes mid-append and reopens: the store always holds
    /// exactly the acknowledged entries, and appends always work after a reopen.
    #[test]
    fn random_append_crash_reopen_sequences(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStorage::open(dir.path()).unwrap();
        let mut model: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
        let mut current = s.create_ledger("t").unwrap();
        model.insert(current, Vec::new());
        let mut n = 0usize;
        for op in ops {
            n += 1;
            let data = vec![(n % 251) as u8; n * 7 % 300];
            match op {
                Op::Append(len) => {
                    let data = vec![(n % 251) as u8; len];
                    prop_assert_eq!(s.append(current, &data).unwrap() as usize, model[&current].len());
                    model.get_mut(&current).unwrap().push(data);
                }
                Op::FailedAppend(share) => {
                    let cut = (RECORD_HEADER as usize + data.len()) * share as usize / 1000;
                    *s.fault.lock() = Some(Fault::WriteFailsAfter(cut));
                    prop_assert!(s.append(current, &data).is_err());
                }
                Op::Crash(share) => {
                    let path = seg_path(&s, current);
                    drop(s);
                    let mut record = record_header(&data).to_vec();
                    record.extend_from_slice(&data);
                    record.truncate(record.len() * share as usize / 1000);
                    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
                    f.write_all(&record).unwrap();
                    s = FileStorage::open(dir.path()).unwrap();
                }
                Op::Reopen => {
                    drop(s);
                    s = FileStorage::open(dir.path()).unwrap();
                }
                Op::NewLedger => {
                    current = s.create_ledger("t").unwrap();
                    model.insert(current, Vec::new());
                }
            }
            for (&l, want) in &model {
                prop_assert_eq!(&all(&s, l), want);
            }
        }
        drop(s);
        let s = FileStorage::open(dir.path()).unwrap();
        prop_assert!(s.recovered().is_empty());
        let counts: Vec<_> = model.iter().map(|(&l, v)| (l, v.len() as u64)).collect();
        prop_assert_eq!(s.ledgers("t").unwrap(), counts);
        for (&l, want) in &model {
            prop_assert_eq!(&all(&s, l), want);
        }
    }
}

#[test]
fn close_releases_the_directory_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    let l = s.create_ledger("t").unwrap();
    s.append(l, b"a").unwrap();
    s.close();
    s.close();
    for err in [
        s.append(l, b"b").unwrap_err(),
        s.read(l, 0, 0).unwrap_err(),
        s.ledgers("t").unwrap_err(),
        s.create_ledger("t").unwrap_err(),
    ] {
        assert!(matches!(err, Error::Closed(_)), "{err}");
    }
    let again = FileStorage::open(dir.path()).unwrap();
    assert_eq!(all(&again, l), vec![b"a".to_vec()]);
}
