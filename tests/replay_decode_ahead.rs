//! A replay session that decodes a batch on a second thread, slices ahead of the replay, gives
//! what decoding on the feeding thread gives: the same measurements for every design (Belady's two
//! passes included) and brokers, and the same errors, naming the same row and cursor. So does
//! feeding all the batches of a source in one call (`Session::feed_all`), where the decoding runs
//! on across the batches: a failed batch is still the last one replayed, and the source's own
//! error comes after the batches before it.

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use ledgercache::config::SettingValue;
use ledgercache::lab::replay::{
    FeedError, FeedStatus, Session, DECODE_AHEAD_ROWS, DECODE_AHEAD_SLICES, DECODE_SLICE_ROWS,
};
use ledgercache::lab::workload::{generate, WorkloadSpec};
use ledgercache::CacheConfig;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;
use support::trace_rows::{batch, config, open, read, tail_move_rows, Row};

use SettingValue::{Float, Int, Str};

/// A two-broker trace several slices long, with seeks and redeliveries.
fn trace() -> RecordBatch {
    let mut s = WorkloadSpec::default();
    for (k, v) in [
        ("test_duration_minutes", Float(1.0)),
        ("brokers", Int(2)),
        ("topics", Int(4)),
        ("producer_rate", Int(4000)),
        ("subscriptions_per_topic", Int(2)),
        ("redelivery_rate", Float(0.01)),
        ("seeks_per_minute", Float(4.0)),
    ] {
        s.set(k, &v).unwrap();
    }
    let b = generate(&s, 7).to_record_batch();
    assert!(
        b.num_rows() > 4 * DECODE_SLICE_ROWS,
        "the trace spans several slices: {} rows",
        b.num_rows()
    );
    b
}

fn configs() -> Vec<CacheConfig> {
    [
        "pip430",
        "pip430-fifo",
        "lru",
        "legacy",
        "segmented",
        "belady",
    ]
    .into_iter()
    .map(|strategy| {
        config(&[
            ("strategy", Str(strategy.into())),
            ("cache_size_bytes", Int(2 << 20)),
        ])
    })
    .collect()
}

/// Feeds `batches` (twice where Belady asks) and returns every run's measurements.
fn replayed(batches: &[RecordBatch], decode_ahead: bool) -> Vec<String> {
    let mut session = Session::new(configs()).unwrap().decode_ahead(decode_ahead);
    for b in batches {
        session.feed(b).unwrap();
    }
    if session.needs_second_pass() {
        session.start_second_pass();
        for b in batches {
            session.feed(b).unwrap();
        }
    }
    session
        .finish()
        .into_iter()
        .map(|(broker, config, metrics, _)| format!("{broker} {:?} {metrics:?}", config.strategy))
        .collect()
}

#[test]
fn decoding_ahead_replays_as_decoding_on_the_feeding_thread() {
    let whole = trace();
    let serial = replayed(std::slice::from_ref(&whole), false);
    assert_eq!(
        serial.len(),
        2 * configs().len(),
        "two brokers, every design"
    );
    assert_eq!(replayed(std::slice::from_ref(&whole), true), serial);
    // Batches of odd lengths: one slice and a bit, a short one, the rest.
    let cuts = [DECODE_SLICE_ROWS + 17, 5];
    let (mut at, mut parts) = (0, Vec::new());
    for len in cuts {
        parts.push(whole.slice(at, len));
        at += len;
    }
    parts.push(whole.slice(at, whole.num_rows() - at));
    assert_eq!(replayed(&parts, true), serial);
}

/// The cursors' names reach the engine decoding ahead too: their hashes order Pulsar's cursor
/// container, and this trace's result depends on that order.
#[test]
fn decoding_ahead_hands_the_cursor_names_hashes_to_the_engine() {
    let b = batch(&tail_move_rows(2 * DECODE_SLICE_ROWS));
    assert!(b.num_rows() > 2 * DECODE_SLICE_ROWS);
    let hits = |decode_ahead: bool, exact: bool| {
        let c = config(&[("exact_cursor_counts", SettingValue::Bool(exact))]);
        let mut session = Session::new(vec![c]).unwrap().decode_ahead(decode_ahead);
        session.feed(&b).unwrap();
        session.finish()[0].2.hits
    };
    let pulsar = hits(false, false);
    assert_eq!(pulsar, hits(false, true) + 1);
    assert_eq!(hits(true, false), pulsar);
    assert_eq!(hits(true, true), pulsar - 1);
}

/// A trace of `rows` rows, long enough to be decoded ahead, that reads on a cursor its topic never
/// opened at row `at`.
fn reading_an_unopened_cursor(rows: usize, at: usize) -> RecordBatch {
    let mut trace: Vec<Row> = vec![open(0, "c", None)];
    trace.extend((1..rows).map(|i| read(i as i64, "c", 1)));
    trace[at] = read(at as i64, "stranger", 1);
    batch(&trace)
}

fn error_of(b: &RecordBatch, decode_ahead: bool) -> String {
    let mut session = Session::new(configs()).unwrap().decode_ahead(decode_ahead);
    session.feed(b).unwrap_err().to_string()
}

#[test]
fn an_unopened_cursor_is_named_as_on_the_feeding_thread() {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let at = 2 * DECODE_SLICE_ROWS + 3;
    let b = reading_an_unopened_cursor(rows, at);
    let serial = error_of(&b, false);
    assert!(
        serial.contains(&format!("row {at}")) && serial.contains("\"stranger\""),
        "{serial}"
    );
    assert_eq!(error_of(&b, true), serial);
}

#[test]
fn a_bad_row_in_a_later_slice_is_the_error_of_the_feed() {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let plain = reading_an_unopened_cursor(rows, 1);
    let at = 2 * DECODE_SLICE_ROWS + 5;
    let ops: Vec<&str> = (0..rows)
        .map(|i| match i {
            0 => "open",
            i if i == at => "fly",
            _ => "read",
        })
        .collect();
    // Row 1 is fine now; row `at` has an op no trace has.
    let b = with_column(&with_column(&plain, "op", ops), "cursor", vec!["c"; rows]);
    let serial = error_of(&b, false);
    assert!(serial.contains(&format!("row {at}")), "{serial}");
    assert_eq!(error_of(&b, true), serial);
}

/// `b` with column `name` replaced by `array`.
fn with_array(b: &RecordBatch, name: &str, array: ArrayRef) -> RecordBatch {
    let schema = b.schema();
    let columns: Vec<(&str, ArrayRef)> = schema
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| {
            let c = if f.name() == name { &array } else { c };
            (f.name().as_str(), c.clone())
        })
        .collect();
    RecordBatch::try_from_iter(columns).unwrap()
}

/// `b` with column `name` replaced by the strings `values`.
fn with_column(b: &RecordBatch, name: &str, values: Vec<&str>) -> RecordBatch {
    with_array(b, name, Arc::new(StringArray::from(values)))
}

#[test]
fn a_bad_row_after_an_unopened_cursor_is_the_error_as_on_the_feeding_thread() {
    // The one-thread path decodes the whole batch before replaying any of it.
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let b = reading_an_unopened_cursor(rows, 5);
    let at = 2 * DECODE_SLICE_ROWS + 5;
    let mut ops: Vec<&str> = (0..rows)
        .map(|i| if i == 0 { "open" } else { "read" })
        .collect();
    ops[at] = "fly";
    let b = with_column(&b, "op", ops);
    let serial = error_of(&b, false);
    assert!(serial.contains(&format!("row {at}")), "{serial}");
    assert_eq!(error_of(&b, true), serial);
}

/// Brokers b1 (the first the trace names) and b2 each read an unopened cursor, one in the first
/// slice and the other in the third; the one-thread path replays b1's events of the whole batch
/// before b2's, so b1's error is the feed's either way.
fn two_brokers_failing(b1_fails_first: bool) {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let mut trace: Vec<Row> = vec![open(0, "c", None), open(0, "c", None)];
    trace.extend((2..rows).map(|i| read(i as i64, "c", 1)));
    let (early, late) = (11, 2 * DECODE_SLICE_ROWS + 11);
    trace[early] = read(early as i64, "stranger", 1);
    trace[late] = read(late as i64, "stranger", 1);
    let (b1_row, b2_row) = if b1_fails_first {
        (early, late)
    } else {
        (late, early)
    };
    let brokers: Vec<&str> = (0..rows)
        .map(|i| if i == 1 || i == b2_row { "b2" } else { "b1" })
        .collect();
    let b = with_column(&batch(&trace), "broker", brokers);
    let serial = error_of(&b, false);
    assert!(serial.contains(&format!("row {b1_row}")), "{serial}");
    assert_eq!(error_of(&b, true), serial);
}

#[test]
fn of_two_brokers_failing_the_first_brokers_error_is_reported_as_on_the_feeding_thread() {
    two_brokers_failing(false);
    two_brokers_failing(true);
}

#[test]
fn a_dictionary_key_out_of_range_late_wins_over_an_earlier_bad_row() {
    // Decoding a batch whole checks its dictionaries' keys before any row.
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let b = reading_an_unopened_cursor(rows, 1);
    let bad_key = 2 * DECODE_SLICE_ROWS + 9;
    // Row 1, in the first slice, has an op no trace has; row `bad_key`, in the third, a key past
    // the dictionary's values.
    let keys = Int32Array::from_iter_values((0..rows).map(|i| match i {
        0 => 0,
        1 => 2,
        i if i == bad_key => 7,
        _ => 1,
    }));
    let values = Arc::new(StringArray::from(vec!["open", "read", "fly"]));
    // SAFETY: only the row `bad_key` holds a key past the values; the decoder must refuse it
    // rather than read past them (what this test checks), and nothing else reads the array.
    let ops = unsafe { DictionaryArray::<Int32Type>::new_unchecked(keys, values) };
    let b = with_column(
        &with_array(&b, "op", Arc::new(ops)),
        "cursor",
        vec!["c"; rows],
    );
    let serial = error_of(&b, false);
    assert!(serial.contains("dictionary key 7"), "{serial}");
    assert_eq!(error_of(&b, true), serial);
}

#[test]
fn a_new_broker_in_the_second_pass_wins_over_an_earlier_broker_failure() {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let mut trace: Vec<Row> = vec![open(0, "c", None)];
    trace.extend((1..rows).map(|i| read(i as i64, "c", 1)));
    let good = batch(&trace);
    trace[7] = read(7, "stranger", 1);
    let newcomer = 2 * DECODE_SLICE_ROWS + 3;
    let brokers: Vec<&str> = (0..rows)
        .map(|i| if i == newcomer { "b9" } else { "b1" })
        .collect();
    let bad = with_column(&batch(&trace), "broker", brokers);
    let error = |decode_ahead: bool| {
        let belady = config(&[
            ("strategy", Str("belady".into())),
            ("cache_size_bytes", Int(1 << 20)),
        ]);
        let mut session = Session::new(vec![belady])
            .unwrap()
            .decode_ahead(decode_ahead);
        session.feed(&good).unwrap();
        session.start_second_pass();
        session.feed(&bad).unwrap_err().to_string()
    };
    let serial = error(false);
    assert!(serial.contains("second pass holds a broker"), "{serial}");
    assert_eq!(error(true), serial);
}

/// Every run's measurements, as [`replayed`] gives them.
fn measurements(session: Session) -> Vec<String> {
    session
        .finish()
        .into_iter()
        .map(|(broker, config, metrics, _)| format!("{broker} {:?} {metrics:?}", config.strategy))
        .collect()
}

/// The batches as a source for `feed_all`, and how many it has given so far.
fn source<'a>(
    batches: &'a [RecordBatch],
    taken: &'a AtomicUsize,
) -> impl FnMut(&FeedStatus) -> Option<Result<RecordBatch, String>> + Send + 'a {
    move |_| {
        let i = taken.fetch_add(1, Ordering::SeqCst);
        batches.get(i).cloned().map(Ok)
    }
}

/// `whole` cut into batches of odd lengths: one slice and a bit, a short one, two slices, the rest.
fn cut(whole: &RecordBatch) -> Vec<RecordBatch> {
    let (mut at, mut parts) = (0, Vec::new());
    for len in [DECODE_SLICE_ROWS + 17, 5, 1, 2 * DECODE_SLICE_ROWS] {
        parts.push(whole.slice(at, len));
        at += len;
    }
    parts.push(whole.slice(at, whole.num_rows() - at));
    parts
}

#[test]
fn feeding_all_batches_in_one_call_replays_as_feeding_each() {
    let parts = cut(&trace());
    let serial = replayed(&parts, false);
    for decode_ahead in [true, false] {
        let mut session = Session::new(configs()).unwrap().decode_ahead(decode_ahead);
        let taken = AtomicUsize::new(0);
        session
            .feed_all(&mut source(&parts, &taken), &mut || Ok(()))
            .unwrap();
        assert!(session.needs_second_pass(), "Belady is among the designs");
        session.start_second_pass();
        let taken = AtomicUsize::new(0);
        session
            .feed_all(&mut source(&parts, &taken), &mut || Ok(()))
            .unwrap();
        assert_eq!(measurements(session), serial, "decode_ahead={decode_ahead}");
    }
}

/// The error feeding `batches` one by one stops at, and the one `feed_all` ends with (decoding
/// ahead), with how many batches the source gave it.
fn errors_feeding_each_and_all(batches: &[RecordBatch]) -> (String, String, usize) {
    let mut session = Session::new(configs()).unwrap().decode_ahead(false);
    let each = batches
        .iter()
        .find_map(|b| session.feed(b).err())
        .expect("a batch fails")
        .to_string();
    let mut session = Session::new(configs()).unwrap();
    let taken = AtomicUsize::new(0);
    let all = match session.feed_all(&mut source(batches, &taken), &mut || Ok(())) {
        Err(FeedError::Replay(e)) => e.to_string(),
        other => panic!("expected the replay's error, got {other:?}"),
    };
    (each, all, taken.load(Ordering::SeqCst))
}

/// Three batches of `rows` rows reading cursor "c" (opened at row 0), with a read of an unopened
/// cursor and unknown ops at the given rows of the whole.
fn three_batches(
    rows: usize,
    unopened: usize,
    bad_ops: &[(usize, &'static str)],
) -> Vec<RecordBatch> {
    let whole = reading_an_unopened_cursor(3 * rows, unopened);
    let mut ops: Vec<&str> = (0..3 * rows)
        .map(|i| if i == 0 { "open" } else { "read" })
        .collect();
    for &(at, op) in bad_ops {
        ops[at] = op;
    }
    let whole = with_column(&whole, "op", ops);
    (0..3).map(|i| whole.slice(i * rows, rows)).collect()
}

#[test]
fn a_failed_batch_is_the_last_feed_all_replays() {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    // The second batch reads an unopened cursor in its first slice and has an unknown op in its
    // third; the third batch has an unknown op in its first row. Fed one by one, the second
    // batch's bad op is the error (a batch is decoded whole before it replays).
    let bad_op = rows + 2 * DECODE_SLICE_ROWS + 5;
    let batches = three_batches(rows, rows + 5, &[(bad_op, "fly"), (2 * rows, "swim")]);
    let (each, all, taken) = errors_feeding_each_and_all(&batches);
    assert!(each.contains(&format!("row {bad_op}")), "{each}");
    assert_eq!(all, each);
    assert!(
        taken <= 3,
        "the source was asked past the failed batch's next: {taken}"
    );

    // A replay error alone in the second batch, and a bad row in the third: the replay error.
    let batches = three_batches(rows, rows + 9, &[(2 * rows + 3, "swim")]);
    let (each, all, _) = errors_feeding_each_and_all(&batches);
    assert!(
        each.contains(&format!("row {}", rows + 9)) && each.contains("\"stranger\""),
        "{each}"
    );
    assert_eq!(all, each);
}

#[test]
fn a_source_error_ends_feed_all_after_the_batches_before_it() {
    let parts = cut(&trace());
    let before = &parts[..3];
    let serial = {
        let mut session = Session::new(configs()).unwrap().decode_ahead(false);
        for b in before {
            session.feed(b).unwrap();
        }
        measurements(session)
    };
    for decode_ahead in [true, false] {
        let mut session = Session::new(configs()).unwrap().decode_ahead(decode_ahead);
        let mut given = before.iter().cloned();
        let mut failing =
            move |_: &FeedStatus| Some(given.next().ok_or_else(|| "boom".to_string()));
        match session.feed_all(&mut failing, &mut || Ok(())) {
            Err(FeedError::Source(e)) => assert_eq!(e, "boom"),
            other => panic!("expected the source's error, got {other:?}"),
        }
        assert_eq!(measurements(session), serial, "decode_ahead={decode_ahead}");
    }
}

/// A source that gives `first`, then waits (up to 20 s) for the feed to stop taking batches,
/// setting `waiting` while it waits and `saw_stop` if the feed stopped.
fn waiting_after<'a>(
    first: RecordBatch,
    waiting: &'a AtomicBool,
    saw_stop: &'a AtomicBool,
) -> impl FnMut(&FeedStatus) -> Option<Result<RecordBatch, String>> + Send + 'a {
    let mut first = Some(first);
    move |status| {
        if let Some(b) = first.take() {
            return Some(Ok(b));
        }
        waiting.store(true, Ordering::SeqCst);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if status.stopped() {
                saw_stop.store(true, Ordering::SeqCst);
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }
}

#[test]
fn an_interrupt_while_the_source_is_slow_ends_feed_all_at_once() {
    let (waiting, saw_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut slow = waiting_after(trace().slice(0, 100), &waiting, &saw_stop);
    let mut session = Session::new(configs()).unwrap();
    let mut check = || {
        if waiting.load(Ordering::SeqCst) {
            Err(ledgercache::Error::Interrupted)
        } else {
            Ok(())
        }
    };
    let start = Instant::now();
    match session.feed_all(&mut slow, &mut check) {
        Err(FeedError::Replay(ledgercache::Error::Interrupted)) => {}
        other => panic!("an interrupt while the source was slow ends the feed: {other:?}"),
    }
    // Checked while waiting for the source, and the source was told, so the feed did not wait
    // for it (20 s).
    assert!(
        saw_stop.load(Ordering::SeqCst),
        "the source was told the feed stopped"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn after_a_failed_batch_the_source_is_not_drained() {
    let rows = 3 * DECODE_SLICE_ROWS + 10;
    let failing = reading_an_unopened_cursor(rows, 5);
    // Batches of no rows send the replay nothing: the decoder must still stop taking them.
    let taken = AtomicUsize::new(0);
    let mut endless = |_: &FeedStatus| {
        let i = taken.fetch_add(1, Ordering::SeqCst);
        (i < 1_000_000).then(|| {
            Ok::<_, String>(if i == 0 {
                failing.clone()
            } else {
                failing.slice(0, 0)
            })
        })
    };
    let mut session = Session::new(configs()).unwrap();
    match session.feed_all(&mut endless, &mut || Ok(())) {
        Err(FeedError::Replay(e)) => assert!(e.to_string().contains("\"stranger\""), "{e}"),
        other => panic!("expected the replay's error, got {other:?}"),
    }
    // The failed one, those waiting in the channel and one being sent when the replay stopped:
    // the decoder is never further ahead, however long the replay of the failed batch takes.
    assert!(
        taken.load(Ordering::SeqCst) <= DECODE_AHEAD_SLICES + 2,
        "batches taken: {taken:?}"
    );

    // Batches of one long slice each (a long dictionary): the rows out bound the decoder, not the
    // slices. The failed one (its bad row last) and the next are out while the replay fails; a
    // third is taken, whose slice waits for room.
    let rows = 200_000;
    let long_dictionary = |b: &RecordBatch| {
        let mut names = vec!["t".to_string()];
        names.extend((1..50_000).map(|i| format!("unused-{i}")));
        let keys = Int32Array::from(vec![0; b.num_rows()]);
        let topics =
            DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(names)));
        with_array(b, "topic", Arc::new(topics.unwrap()))
    };
    // The first reads an unopened cursor in its last row; the next go on reading in time.
    let batch_of = |k: usize| {
        let from = (k * rows) as i64;
        let mut trace: Vec<Row> = (0..rows as i64).map(|i| read(from + i, "c", 1)).collect();
        if k == 0 {
            trace[0] = open(0, "c", None);
            trace[rows - 1] = read(rows as i64 - 1, "stranger", 1);
        }
        long_dictionary(&batch(&trace))
    };
    assert!(
        rows > DECODE_AHEAD_ROWS,
        "a slice is the whole batch, beyond the budget"
    );
    let taken = AtomicUsize::new(0);
    let mut long_batches = |_: &FeedStatus| {
        let i = taken.fetch_add(1, Ordering::SeqCst);
        (i < 1_000).then(|| Ok::<_, String>(batch_of(i)))
    };
    let mut session = Session::new(configs()).unwrap();
    // The replay's checks take their time, as a slow replay's would: the decoder has all the
    // time it wants to run ahead.
    let mut slow_check = || {
        std::thread::sleep(Duration::from_millis(10));
        Ok(())
    };
    match session.feed_all(&mut long_batches, &mut slow_check) {
        Err(FeedError::Replay(e)) => assert!(e.to_string().contains("\"stranger\""), "{e}"),
        other => panic!("expected the replay's error, got {other:?}"),
    }
    assert!(
        taken.load(Ordering::SeqCst) <= 3,
        "batches taken: {taken:?}"
    );

    // A source waiting for its next batch after a failed one is told the feed stopped.
    let (waiting, saw_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut slow = waiting_after(failing, &waiting, &saw_stop);
    let mut session = Session::new(configs()).unwrap();
    assert!(session.feed_all(&mut slow, &mut || Ok(())).is_err());
    assert!(saw_stop.load(Ordering::SeqCst) || !waiting.load(Ordering::SeqCst));
}
