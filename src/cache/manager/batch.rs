//! Inserting many entries of one ledger at once: one cache-lock acquisition and one update of the
//! shared counters per batch instead of per entry, with the same outcome as inserting them one by
//! one.

use super::EntryCache;
use crate::cache::entry::Payload;
use crate::cache::position::Position;
use crate::cache::range_cache::set_aside;
use crate::cache::read_count::ReadCount;
use crate::cache::removal_queue::QueueItem;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// Queue items a batch pushes at once (bounds the batch's own memory, not the cache's).
const QUEUE_CHUNK: usize = 4096;

/// One entry of a batch: what [`EntryCache::insert_counted`] takes besides the position.
#[derive(Debug)]
pub struct BatchEntry {
    pub payload: Payload,
    /// The accounted size.
    pub size: u32,
    /// [`ReadCount::expecting`] its expected reads, or a handler shared with readers
    /// (`ReadCount::from(Some(handler))`).
    pub read_count: ReadCount,
}

impl EntryCache {
    /// Caches `entries` at consecutive positions of ledger `ledger_id`, the first at entry
    /// `first_entry_id`, skipping positions that are cached already; returns how many were
    /// inserted. The cache ends up as if each entry had been passed to
    /// [`insert_counted`](Self::insert_counted) in order, except that the batch shares
    /// one timestamp per lock hold: the same entries, counters and removal-queue order, and a size
    /// pass runs (or the background evictor is woken) as soon as an entry takes the cache over its
    /// trigger threshold, so the batch is inserted in as many lock holds as it crosses the trigger.
    ///
    /// Fails before inserting anything when the last entry id would overflow `i64`.
    pub fn insert_batch<I>(&self, ledger_id: i64, first_entry_id: i64, entries: I) -> Result<u64>
    where
        I: IntoIterator<Item = BatchEntry>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut entries = entries.into_iter();
        let n = entries.len();
        if n > 0 {
            i64::try_from(n - 1)
                .ok()
                .and_then(|d| first_entry_id.checked_add(d))
                .ok_or_else(|| {
                    Error::invalid(
                        "first_entry_id",
                        format!("{first_entry_id} + {n} entries overflows a 64-bit entry id"),
                    )
                })?;
        }
        let shared = &self.shared;
        if self.disabled {
            return Ok(0);
        }
        // A background evictor is only woken, so there is no reason to break the batch for it.
        let trigger = match shared.wake_evictor {
            None => shared.trigger_bytes.load(Ordering::Relaxed),
            Some(_) => u64::MAX,
        };
        let mut entry_id = first_entry_id;
        let mut inserted_total = 0u64;
        // This hold's queue items, pushed together before the cache lock is let go.
        let mut queued = Vec::with_capacity(n.min(QUEUE_CHUNK));
        // External payloads let go of during a hold (refused, or replaced by a copy), released
        // after it (see `range_cache::set_aside`), as are those a size pass evicts.
        let mut released = Vec::new();
        loop {
            let (mut inserted, mut bytes, mut crossed) = (0u64, 0u64, false);
            {
                let mut state = self.state.lock();
                if self.is_closed() {
                    return Err(Error::Closed(format!("entry cache {:?}", self.name)));
                }
                let base = shared.size_bytes.load(Ordering::Acquire);
                let now = shared.clock.now_ns();
                for entry in entries.by_ref() {
                    let position = Position::new(ledger_id, entry_id);
                    // Wraps only past the last entry, whose id was checked above.
                    entry_id = entry_id.wrapping_add(1);
                    let payload = if shared.config.copy_entries {
                        let copy = entry.payload.deep_copy();
                        set_aside(entry.payload, &mut released);
                        copy
                    } else {
                        entry.payload
                    };
                    let slot =
                        match state.insert(position, payload, entry.read_count, entry.size, now) {
                            Ok(slot) => slot,
                            Err(refused) => {
                                set_aside(refused, &mut released);
                                continue;
                            }
                        };
                    queued.push(QueueItem {
                        cache: self.id,
                        slot,
                    });
                    if queued.len() == QUEUE_CHUNK {
                        shared.queue.push_all(&queued);
                        queued.clear();
                    }
                    inserted += 1;
                    bytes += entry.size as u64;
                    if base + bytes > trigger {
                        crossed = true;
                        break;
                    }
                }
                // Under the cache lock, as in insert_counted, to keep serial order.
                shared.queue.push_all(&queued);
                queued.clear();
            }
            if inserted > 0 {
                shared.entry_count.fetch_add(inserted, Ordering::AcqRel);
                let total = shared.size_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
                shared
                    .counters
                    .inserted
                    .fetch_add(inserted, Ordering::Relaxed);
                inserted_total += inserted;
                shared.after_insert(total, &mut released);
            }
            released.clear();
            if !crossed {
                return Ok(inserted_total);
            }
        }
    }
}
