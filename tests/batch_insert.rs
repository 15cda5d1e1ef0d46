//! `EntryCache::insert_batch` against the same entries inserted one by one: same entries, counters,
//! eviction and removal-queue order.

mod support;

use ledgercache::cache::arrow_payload::{slices_of, ArrowValues};
use ledgercache::{
    BatchEntry, CacheConfig, EntryCacheManager, ManualClock, Payload, Position, ReadCount,
    SettingValue,
};
use proptest::prelude::*;
use std::sync::Arc;

fn manager(settings: &[(&str, SettingValue)]) -> EntryCacheManager {
    let mut c = CacheConfig::default();
    for (k, v) in settings {
        c.set(k, v.clone()).unwrap();
    }
    EntryCacheManager::new(c, Arc::new(ManualClock::new(0)), false).unwrap()
}

fn entry(size: u32, reads: i32) -> BatchEntry {
    BatchEntry {
        payload: Payload::from(vec![size as u8; size as usize]),
        size,
        read_count: ReadCount::expecting(reads),
    }
}

/// What the cache holds, for comparisons: (position, bytes, expected reads).
fn contents(m: &EntryCacheManager, name: &str) -> Vec<(Position, Vec<u8>, Option<i32>)> {
    let c = m.get_cache(name);
    c.positions()
        .into_iter()
        .map(|p| {
            let reads = c.expected_reads(p).unwrap();
            let e = c.get(p).unwrap();
            (p, e.data().to_vec(), reads)
        })
        .collect()
}

/// Inserts `sizes` into two managers, one batch and one insert at a time, after the same
/// `preexisting` single inserts, and checks they end up the same.
fn batch_equals_singles(settings: &[(&str, SettingValue)], preexisting: &[i64], sizes: &[u32]) {
    let (batched, single) = (manager(settings), manager(settings));
    for m in [&batched, &single] {
        for &e in preexisting {
            m.get_cache("ml")
                .insert(Position::new(3, e), Payload::from(vec![1u8; 10]), 1, None)
                .unwrap();
        }
    }
    let entries = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| entry(s, i as i32 % 3));
    let n = batched
        .get_cache("ml")
        .insert_batch(3, 5, entries.clone().collect::<Vec<_>>())
        .unwrap();
    let mut one_by_one = 0;
    let c = single.get_cache("ml");
    for (i, e) in entries.enumerate() {
        let p = Position::new(3, 5 + i as i64);
        one_by_one += c
            .insert_counted(p, e.payload, e.read_count, e.size)
            .unwrap() as u64;
    }
    assert_eq!(n, one_by_one);
    assert_eq!(batched.stats(), single.stats());
    assert_eq!(batched.removal_queue_len(), single.removal_queue_len());
    assert_eq!(contents(&batched, "ml"), contents(&single, "ml"));
    assert_eq!(
        batched.sum_of_cache_sizes(),
        (batched.entry_count(), batched.size_bytes())
    );
    // Same queue order: freeing everything evicts the same entries in the same order.
    assert_eq!(batched.evict_bytes(u64::MAX), single.evict_bytes(u64::MAX));
}

#[test]
fn a_batch_is_its_entries_inserted_in_order() {
    batch_equals_singles(&[], &[6, 9], &[1, 2, 3, 4, 5, 0, 7]);
}

#[test]
fn a_batch_bigger_than_the_cache_triggers_size_passes() {
    let settings = [
        ("cache_size_bytes", SettingValue::Int(1000)),
        ("eviction_watermark", SettingValue::Float(0.8)),
    ];
    batch_equals_singles(&settings, &[], &[64; 200]);
    let m = manager(&settings);
    let c = m.get_cache("ml");
    assert_eq!(
        c.insert_batch(1, 0, (0..200).map(|_| entry(64, 0)))
            .unwrap(),
        200
    );
    assert!(
        m.size_bytes() <= m.config().trigger_bytes(),
        "{}",
        m.size_bytes()
    );
    assert!(m.stats().size_passes > 1);
}

#[test]
fn entry_ids_must_not_overflow() {
    let m = manager(&[]);
    let c = m.get_cache("ml");
    let err = c
        .insert_batch(1, i64::MAX - 1, (0..3).map(|_| entry(1, 0)))
        .unwrap_err();
    assert!(err.to_string().contains("first_entry_id"), "{err}");
    assert!(c.is_empty());
    assert_eq!(
        c.insert_batch(1, i64::MAX - 1, (0..2).map(|_| entry(1, 0)))
            .unwrap(),
        2
    );
    assert!(c.contains(Position::new(1, i64::MAX)));
    assert_eq!(c.insert_batch(1, i64::MAX, std::iter::empty()).unwrap(), 0);
}

#[test]
fn closed_caches_and_disabled_caching() {
    let m = manager(&[]);
    let c = m.get_cache("ml");
    m.remove_cache("ml");
    assert!(c.insert_batch(1, 0, [entry(1, 0)]).is_err());
    let off = manager(&[("cache_size_bytes", SettingValue::Int(0))]);
    assert_eq!(
        off.get_cache("ml")
            .insert_batch(1, 0, [entry(1, 0)])
            .unwrap(),
        0
    );
    assert_eq!(off.stats().inserted, 0);
}

#[test]
fn arrow_slices_are_cached_without_copying() {
    let values = arrow_buffer::Buffer::from_vec(b"abcdef".to_vec());
    let m = manager(&[]);
    let c = m.get_cache("ml");
    let mut group = slices_of(values.clone(), 2).unwrap();
    let entries = [(0, 2), (2, 4)].map(|(start, len)| BatchEntry {
        payload: group.slice(start, len).unwrap(),
        size: len as u32,
        read_count: ReadCount::UNCOUNTED,
    });
    c.insert_batch(1, 0, entries).unwrap();
    drop((values, group));
    let e = c.get(Position::new(1, 1)).unwrap();
    assert_eq!(e.data(), b"cdef");
    let values = &e.payload().buffer::<ArrowValues>().unwrap().0;
    assert_eq!(e.data().as_ptr(), values.as_slice()[2..].as_ptr());
    // The buffer stays while any entry cut from it does.
    c.remove_range(Position::new(1, 0), Position::new(1, 1), true);
    assert_eq!(e.data(), b"cdef");
}

proptest! {
    #![proptest_config(support::fixed_cases(64))]

    #[test]
    fn batches_equal_single_inserts(
        sizes in proptest::collection::vec(0u32..300, 0..80),
        preexisting in proptest::collection::vec(0i64..90, 0..10),
        cache_size in 0i64..4000,
        copy in any::<bool>(),
    ) {
        batch_equals_singles(
            &[
                ("cache_size_bytes", SettingValue::Int(cache_size)),
                ("copy_entries", SettingValue::Bool(copy)),
            ],
            &preexisting,
            &sizes,
        );
    }
}
