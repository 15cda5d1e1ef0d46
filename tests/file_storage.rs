//! FileStorage across processes: the directory lock between two processes, and `kill -9` of a
//! writing process at random times. The child processes are this test binary run again on one
//! `#[ignore]`d test (named by `--exact`), told what to do through an environment variable.

use ledgercache::broker::ledger::{LedgerConfig, ManagedLedger};
use ledgercache::broker::storage::{FileOptions, FileStorage, Storage, StorageHandle};
use ledgercache::{CacheConfig, EntryCacheManager, Error, ManualClock, Payload, Position};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "persistent://t/ns/crash";
const ROLE: &str = "LEDGERCACHE_TEST_CHILD";

fn child(test: &str, role: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn ledger(dir: &Path, max_entries_per_ledger: u64) -> ledgercache::Result<ManagedLedger> {
    let store = FileStorage::open(dir)?;
    let manager =
        EntryCacheManager::new(CacheConfig::default(), Arc::new(ManualClock::new(0)), false)?;
    ManagedLedger::open(
        TOPIC,
        &manager,
        StorageHandle::new(Arc::new(store)),
        LedgerConfig {
            max_entries_per_ledger,
            min_rollover_ms: 0,
            ..Default::default()
        },
    )
}

/// The payload of the `seq`-th entry ever written: sizes vary up to 96 KiB so that a kill often
/// lands inside a write that spans several pages.
fn payload(seq: u64) -> Vec<u8> {
    let len = 16 + (seq * 7919 % (96 * 1024));
    let mut v = format!("seq={seq};").into_bytes();
    v.resize(len as usize, (seq % 251) as u8);
    v
}

/// Child: appends entries forever, printing `ack <ledger> <entry> <seq>` after each one returns.
#[test]
#[ignore = "child process of kill_9_during_writes_loses_no_acknowledged_entry"]
fn crash_writer_child() {
    let dir = std::env::var(ROLE).expect("run by the parent test");
    let ml = ledger(Path::new(&dir), 20).unwrap();
    let mut seq = ml.entry_count();
    let mut out = std::io::stdout().lock();
    loop {
        let p = ml.add_entry(Payload::from(payload(seq))).unwrap();
        writeln!(out, "ack {} {} {seq}", p.ledger_id, p.entry_id).unwrap();
        out.flush().unwrap();
        seq += 1;
    }
}

fn acks(stdout: ChildStdout) -> Vec<(Position, u64)> {
    BufReader::new(stdout)
        .lines()
        .map_while(std::result::Result::ok)
        .filter_map(|l| {
            // libtest may print "test crash_writer_child ... " before the first line.
            let f: Vec<&str> = l[l.find("ack ")? + 4..].split(' ').collect();
            Some((
                Position::new(f[0].parse().ok()?, f[1].parse().ok()?),
                f[2].parse().ok()?,
            ))
        })
        .collect()
}

/// `kill -9` a writer at random times, 40 times over one store: after each kill, every entry the
/// writer acknowledged reads back intact, and the next writer appends (a torn record or a 0-byte
/// new segment used to make every later append fail). Prints what recovery found.
#[test]
fn kill_9_during_writes_loses_no_acknowledged_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut acked: Vec<(Position, u64)> = Vec::new();
    let (mut torn, mut empty_segments) = (0, 0);
    let trials = 40u64;
    for trial in 0..trials {
        let mut writer = child("crash_writer_child", path);
        let stdout = writer.stdout.take().unwrap();
        let reader = std::thread::spawn(move || acks(stdout));
        std::thread::sleep(Duration::from_millis(rng.random_range(20..120)));
        writer.kill().unwrap(); // SIGKILL
        writer.wait().unwrap();
        let new = reader.join().unwrap();
        assert!(
            !new.is_empty() || trial > 0,
            "the writer never acknowledged anything"
        );
        acked.extend(new);

        let store = FileStorage::open(dir.path()).unwrap();
        for r in store.recovered() {
            if r.reason.contains("header bytes") {
                empty_segments += 1;
            } else {
                torn += 1;
            }
        }
        assert!(
            store.damaged().is_empty(),
            "trial {trial}: {:?}",
            store.damaged()
        );
        for &(p, seq) in &acked {
            let got = store.read(p.ledger_id, p.entry_id, p.entry_id);
            let got = got.unwrap_or_else(|e| panic!("trial {trial}: acknowledged {p:?}: {e}"));
            assert_eq!(got[0].as_slice(), payload(seq), "trial {trial}: {p:?}");
        }
        drop(store);
    }
    let ml = ledger(dir.path(), 20).unwrap();
    let seq = ml.entry_count();
    // An entry whose append returned but whose acknowledgement was not printed before the kill
    // may survive, at most one per kill: it is complete, so keeping it is right.
    let acked_count = acked.len() as u64;
    assert!(
        (acked_count..=acked_count + trials).contains(&seq),
        "{seq} entries for {acked_count} acknowledged ones"
    );
    let p = ml.add_entry(Payload::from(payload(seq))).unwrap();
    assert!(p > acked.last().unwrap().0);
    println!(
        "{trials} kills, {acked_count} acknowledged entries all intact ({} complete but \
         unacknowledged kept); recovery cut {torn} torn records and repaired {empty_segments} \
         unfinished new segments",
        seq - acked_count
    );
}

/// Child: opens the store read-write, says so, and holds it until its stdin closes.
#[test]
#[ignore = "child process of a_second_process_cannot_open_a_store_being_written"]
fn lock_holder_child() {
    let dir = std::env::var(ROLE).expect("run by the parent test");
    let store = FileStorage::open(&dir).unwrap();
    let l = store.create_ledger("t").unwrap();
    store.append(l, b"from the holder").unwrap();
    println!("locked");
    let _ = std::io::stdin().lines().count();
    drop(store);
}

#[test]
fn a_second_process_cannot_open_a_store_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut holder = child("lock_holder_child", dir.path().to_str().unwrap());
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let started = Instant::now();
    // libtest prints "test lock_holder_child ... " before the child's own output.
    while !lines.next().unwrap().unwrap().ends_with("locked") {
        assert!(started.elapsed() < Duration::from_secs(60));
    }
    let err = FileStorage::open(dir.path())
        .err()
        .expect("a second writer is refused");
    let msg = err.to_string();
    assert!(matches!(err, Error::Storage(_)), "{msg}");
    assert!(
        msg.contains(&dir.path().display().to_string())
            && msg.contains(&format!("process {}", holder.id())),
        "{msg}"
    );
    let read_only = FileOptions {
        read_only: true,
        create: false,
        ..Default::default()
    };
    assert!(FileStorage::open_with(dir.path(), read_only).is_err());
    drop(holder.stdin.take()); // the holder closes its store and exits
    assert!(holder.wait().unwrap().success());
    let store = FileStorage::open_with(dir.path(), read_only).unwrap();
    let (l, n) = store.ledgers("t").unwrap()[0];
    assert_eq!(n, 1);
    assert_eq!(
        store.read(l, 0, 0).unwrap()[0].as_slice(),
        b"from the holder"
    );
}

/// Pulsar closes a managed ledger when its cache goes: an add after `remove_cache` is refused
/// before anything is stored, so retrying it cannot store the entry twice.
#[test]
fn add_entry_after_remove_cache_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStorage::open(dir.path()).unwrap());
    let manager =
        EntryCacheManager::new(CacheConfig::default(), Arc::new(ManualClock::new(0)), false)
            .unwrap();
    let ml = ManagedLedger::open(
        TOPIC,
        &manager,
        StorageHandle::new(store.clone()),
        LedgerConfig::default(),
    )
    .unwrap();
    ml.add_entry(Payload::from(b"kept".to_vec())).unwrap();
    manager.remove_cache(TOPIC).unwrap();
    for _ in 0..2 {
        let err = ml
            .add_entry(Payload::from(b"refused".to_vec()))
            .unwrap_err();
        assert!(matches!(err, Error::Closed(_)), "{err}");
    }
    let (l, n) = store.ledgers(TOPIC).unwrap()[0];
    assert_eq!(n, 1, "nothing was stored after the cache was removed");
    assert_eq!(store.read(l, 0, 0).unwrap()[0].as_slice(), b"kept");
}
