//! Storage reads of the entries a read missed: issued, joined by later reads, completed and cached.

use super::{CacheStrategy, EntryKey, Replayer};
use crate::broker::read_flow::{plan_storage_reads, ReadKind, StorageReadAdmission};
use crate::cache::position::Position;
use std::collections::hash_map::Entry;

/// A storage read under way (reads take time): what it returns is cached when it completes, as
/// `RangeEntryCacheImpl.readFromStorage` inserts in the read's completion.
pub(super) struct PendingStorageRead {
    pub(super) due_ns: u64,
    pub(super) topic: u32,
    pub(super) ledger: i64,
    /// The first entry id of the range it reads (its key among the ranges under way).
    pub(super) first: i64,
    /// The entries it reads (ids and sizes), in order.
    pub(super) entries: Vec<(i64, u32)>,
    /// The cursor whose read issued it, its epoch then, and where its read position was (where
    /// the broker has it when this completes: a read reads one part after the other).
    pub(super) reader: u32,
    pub(super) reader_epoch: u32,
    pub(super) reader_at: Position,
    /// Whether its entries are cached, and with which expected-read count.
    pub(super) admission: StorageReadAdmission,
    /// The entries each read that waits for it takes (each gets copies, as the reader does).
    pub(super) joined: Vec<(i64, i64)>,
    /// Its ledger was deleted meanwhile: it caches nothing.
    pub(super) dropped: bool,
}

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// returns is cached when it completes.
    /// The storage reads of a missed run (entries of `ledger` and their sizes); the read flow
    /// decides whether what each returns is cached. Without read latency it is one storage read,
    /// cached at once. With it, the run waits for the storage reads under way that share entries
    /// with it and reads the rest itself (the rule in [`plan_storage_reads`]); what a storage read
    pub(super) fn flush_misses(
        &mut self,
        topic: u32,
        ledger: i64,
        cursor: u32,
        kind: ReadKind,
        run: &[(i64, u32)],
        now: u64,
    ) {
        let (Some(&(first, _)), Some(&(last, _))) = (run.first(), run.last()) else {
            return;
        };
        if self.read_latency_ns == 0 {
            // It completes as it is issued, with the reader where it was.
            let admission = self.count_storage_read(topic, cursor, kind, run);
            let admitted =
                admission.on_completion(&mut self.topics[topic as usize].activity, cursor);
            self.cache_storage_read(now, topic, ledger, run, &[], admitted);
            return;
        }
        let under_way = self.storage_read_ranges.get(&(topic, ledger));
        // The one starting before the run that may reach into it, then those starting in it.
        let before = under_way.and_then(|m| m.range(..first).next_back());
        let within = under_way.into_iter().flat_map(|m| m.range(first..=last));
        let meeting = before.into_iter().chain(within);
        let plan = plan_storage_reads(
            meeting.map(|(&a, &(b, number))| (number, (a, b))),
            (first, last),
        );
        for (number, served) in plan.joined {
            // Numbered from the front, which is still there (`number` is under way).
            let at = number.wrapping_sub(self.first_storage_read) as usize;
            if let Some(r) = self.storage_reads.get_mut(at) {
                r.joined.push(served);
            }
        }
        // Where the reader is as this run is read: where the broker has it when each part
        // completes.
        let (reader_epoch, reader_at) = self
            .cursors
            .get(topic, cursor)
            .map_or((0, Position::new(ledger, first)), |c| {
                (c.epoch, c.read_position)
            });
        for (from, to) in plan.issued {
            let start = run.partition_point(|&(e, _)| e < from);
            let end = run.partition_point(|&(e, _)| e <= to);
            let part = &run[start..end];
            if part.is_empty() {
                continue;
            }
            let admission = self.count_storage_read(topic, cursor, kind, part);
            let mut entries = self.spare_entry_lists.pop().unwrap_or_default();
            entries.extend_from_slice(part);
            let number = self
                .first_storage_read
                .wrapping_add(self.storage_reads.len() as u64);
            self.storage_read_ranges
                .entry((topic, ledger))
                .or_default()
                .insert(from, (to, number));
            self.storage_reads.push_back(PendingStorageRead {
                due_ns: now.saturating_add(self.read_latency_ns),
                topic,
                ledger,
                first: from,
                entries,
                reader: cursor,
                reader_epoch,
                reader_at,
                admission,
                joined: Vec::new(),
                dropped: false,
            });
        }
    }

    /// Counts a storage read of `entries` as it is issued and asks the read flow whether what it
    /// returns is cached, as far as that is known now.
    pub(super) fn count_storage_read(
        &mut self,
        topic: u32,
        cursor: u32,
        kind: ReadKind,
        entries: &[(i64, u32)],
    ) -> StorageReadAdmission {
        self.metrics.storage_read_ops += 1;
        if let Some(s) = &mut self.second {
            s.storage_read_ops += 1;
        }
        self.metrics.storage_read_bytes +=
            entries.iter().map(|&(_, size)| size as u64).sum::<u64>();
        let activity = &self.topics[topic as usize].activity;
        self.flow.on_storage_read_issued(kind, activity, cursor)
    }

    /// Completes the first storage read under way, after the periodic tasks due before it: what it
    /// returned is cached, and the copies of its reader and of the reads that waited for it are
    /// released (they are dispatched).
    pub(super) fn complete_storage_read(&mut self) {
        let Some(mut r) = self.storage_reads.pop_front() else {
            return;
        };
        self.first_storage_read = self.first_storage_read.wrapping_add(1);
        if r.dropped {
            return;
        }
        if let Entry::Occupied(mut ranges) = self.storage_read_ranges.entry((r.topic, r.ledger)) {
            ranges.get_mut().remove(&r.first);
            if ranges.get().is_empty() {
                ranges.remove();
            }
        }
        self.advance(r.due_ns);
        // The broker reads a read's parts one after the other, each once the one before completed
        // and moved the read position: its reader is where this part started.
        if let Some(h) = self
            .cursors
            .get_mut(r.topic, r.reader)
            .and_then(|c| c.hold.as_mut())
            .filter(|h| h.epoch == r.reader_epoch && h.at < r.reader_at)
        {
            h.at = r.reader_at;
            self.cursor_moved(r.topic, r.reader);
        }
        let activity = &mut self.topics[r.topic as usize].activity;
        let admitted = r.admission.on_completion(activity, r.reader);
        self.cache_storage_read(r.due_ns, r.topic, r.ledger, &r.entries, &r.joined, admitted);
        self.strategy.end_read();
        r.entries.clear();
        self.spare_entry_lists.push(r.entries);
        let cached = self.strategy.cached_bytes();
        self.metrics.peak_cache_bytes = self.metrics.peak_cache_bytes.max(cached);
    }

    /// What a storage read of `entries` (ids and sizes) of `ledger` returned at `now`: its buffers,
    /// and its entries if the read flow admitted them (with that expected-read count), each with a
    /// copy for its reader and for each read that waited for it (`joined`: the entries each takes;
    /// `PendingReadsManager` hands those copies sharing the entry's read counter).
    pub(super) fn cache_storage_read(
        &mut self,
        now: u64,
        topic: u32,
        ledger: i64,
        entries: &[(i64, u32)],
        joined: &[(i64, i64)],
        admitted: Option<i32>,
    ) {
        if let Some(m) = &mut self.memory {
            m.on_storage_read(topic, ledger, entries);
        }
        if let Some(expected) = admitted {
            // How many reads take each entry, its reader's included: each read that waited adds
            // one over its range (a sweep, not a scan of the reads per entry).
            let mut starts = vec![0i64; entries.len() + 1];
            for &(a, b) in joined {
                let from = entries.partition_point(|&(e, _)| e < a);
                let to = entries.partition_point(|&(e, _)| e <= b);
                starts[from] += 1;
                starts[to] -= 1;
            }
            let mut waiting = 0i64;
            for (&(entry, size), &start) in entries.iter().zip(&starts) {
                waiting += start;
                let key = EntryKey {
                    topic,
                    position: Position::new(ledger, entry),
                };
                let copies = u32::try_from(waiting).map_or(u32::MAX, |w| w.saturating_add(1));
                self.strategy.insert_read(now, key, size, expected, copies);
            }
        }
    }
}
