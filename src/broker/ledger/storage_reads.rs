//! Storage reads in flight, shared by the reads that wait for them: a read's missing range joins
//! the storage reads under way that cover part of it and issues the rest; a storage read that
//! completes caches what it returned (as the read flow says) and hands copies to its waiters.

use super::read::slot_of;
use super::{ManagedLedger, State};
use crate::broker::read_flow::{plan_storage_reads, EntryRange, ReadKind, StorageReadAdmission};
use crate::cache::entry::{CachedEntry, Payload};
use crate::cache::position::Position;
use crate::cache::read_count::ReadCountHandler;
use crate::error::Result;

/// A storage read in flight; several reads may wait for it.
pub(super) struct PendingRead {
    pub(super) seq: u64,
    pub(super) ledger: i64,
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) complete_at: u64,
    /// The cursor whose read issued it: expected reads are counted from its position.
    pub(super) reader: u32,
    /// Whether what it returns is cached, as known when it was issued.
    pub(super) admission: StorageReadAdmission,
    pub(super) result: Result<Vec<Payload>>,
    /// The reads waiting for it, each with the entries of it that read takes.
    pub(super) waiters: Vec<(u64, EntryRange)>,
}

impl ManagedLedger {
    /// Reads `first..=last` from storage for read `op_id`: it waits for the storage reads under
    /// way that share entries with it and issues storage reads of the rest (the rule in
    /// [`plan_storage_reads`]). A read that completes at once (`now_only`) joins only reads due by
    /// `now`, and one that will fail none.
    #[allow(
        clippy::too_many_arguments,
        reason = "the read's identity, range and timing, each its own value"
    )]
    pub(super) fn read_from_storage(
        &self,
        st: &mut State,
        op_id: u64,
        reader: u32,
        kind: ReadKind,
        ledger: i64,
        first: i64,
        last: i64,
        now: u64,
        now_only: bool,
    ) {
        // In the order they were issued (completions reorder `pending`).
        let mut under_way: Vec<(u64, usize, EntryRange)> = st
            .pending
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.ledger == ledger && p.result.is_ok() && (!now_only || p.complete_at <= now)
            })
            .map(|(i, p)| (p.seq, i, (p.first, p.last)))
            .collect();
        under_way.sort_unstable_by_key(|&(seq, _, _)| seq);
        let plan = plan_storage_reads(
            under_way.into_iter().map(|(_, i, range)| (i, range)),
            (first, last),
        );
        let mut waits = 0;
        // One wait for each part: a read whose gaps (between cache hits) meet one storage read
        // takes only those gaps' entries of it.
        for (i, served) in plan.joined {
            st.pending[i].waiters.push((op_id, served));
            waits += 1;
        }
        let admission = self
            .inner
            .flow
            .on_storage_read_issued(kind, &st.activity, reader);
        for (first, last) in plan.issued {
            let result = self.inner.storage.read(ledger, first, last);
            let latency = match (&result, now_only) {
                (Ok(entries), false) => self.inner.config.read_latency.of(
                    entries.len() as u64,
                    entries.iter().map(|e| e.len() as u64).sum(),
                ),
                _ => 0,
            };
            let seq = st.next_seq;
            st.next_seq += 1;
            st.pending.push(PendingRead {
                seq,
                ledger,
                first,
                last,
                complete_at: now + latency,
                reader,
                admission,
                result,
                waiters: vec![(op_id, (first, last))],
            });
            waits += 1;
        }
        st.ops
            .get_mut(&op_id)
            .expect("reading for a known read")
            .waiting += waits;
    }

    pub(super) fn complete_due(&self, st: &mut State, now: u64) -> usize {
        let mut finished = 0;
        while let Some(i) = Self::next_due(st, now) {
            let p = st.pending.swap_remove(i);
            finished += self.complete_storage_read(st, p);
        }
        finished
    }

    /// The storage read that completes first among those due by `now`.
    fn next_due(st: &State, now: u64) -> Option<usize> {
        st.pending
            .iter()
            .enumerate()
            .filter(|(_, p)| p.complete_at <= now)
            .min_by_key(|(_, p)| (p.complete_at, p.seq))
            .map(|(i, _)| i)
    }

    /// Caches what a storage read returned and hands copies to the reads waiting for it.
    fn complete_storage_read(&self, st: &mut State, p: PendingRead) -> usize {
        let inner = &*self.inner;
        // What the reads waiting for it do next, they do when it completed.
        let now = p.complete_at;
        let entries = match p.result {
            Ok(payloads) => {
                let admitted = p.admission.on_completion(&mut st.activity, p.reader);
                let (cache_it, expected) = (admitted.is_some(), admitted.unwrap_or(0));
                Ok(payloads
                    .into_iter()
                    .zip(p.first..=p.last)
                    .map(|(payload, e)| {
                        let position = Position::new(p.ledger, e);
                        if cache_it {
                            let size = payload.len() as u32;
                            inner.cache.insert_for_reader(
                                position,
                                payload,
                                ReadCountHandler::new(expected),
                                size,
                            )
                        } else {
                            CachedEntry::uncached(position, payload)
                        }
                    })
                    .collect::<Vec<_>>())
            }
            Err(e) => Err(e),
        };
        let mut finished = 0;
        for (op_id, (take_from, take_to)) in p.waiters {
            let Some(op) = st.ops.get_mut(&op_id) else {
                continue;
            };
            match &entries {
                Ok(entries) => {
                    let taken = entries
                        .iter()
                        .filter(|e| (take_from..=take_to).contains(&e.position().entry_id));
                    for e in taken {
                        if let Some(slot) = slot_of(&op.positions, e.position()) {
                            op.entries[slot] = Some(e.copy());
                        }
                    }
                    op.waiting -= 1;
                }
                Err(_) if !op.retried => {
                    // A failed sub-read falls back to one full read of each run of the step (as
                    // `RangeEntryCacheImpl` reads a ledger's whole range when a partial read fails).
                    op.retried = true;
                    let step = op.step.clone();
                    for (slot, p) in op.positions.iter().enumerate() {
                        if step.iter().any(|&(l, first, last)| {
                            p.ledger_id == l && (first..=last).contains(&p.entry_id)
                        }) {
                            op.entries[slot] = None;
                        }
                    }
                    let (cursor, kind) = (op.cursor, op.kind);
                    op.waiting -= 1;
                    for (ledger, first, last) in step {
                        self.read_from_storage(
                            st, op_id, cursor, kind, ledger, first, last, now, true,
                        );
                    }
                    continue;
                }
                Err(err) => {
                    op.waiting -= 1;
                    let first_step = op.step.first().map(|&(l, f, _)| Position::new(l, f))
                        == op.positions.first().copied();
                    if first_step {
                        op.outcome = Some(Err(err.clone()));
                        continue;
                    }
                    op.step_failed = true;
                }
            }
            if op.waiting == 0 && op.outcome.is_none() {
                self.continue_read(st, op_id, now);
                if st.ops.get(&op_id).is_some_and(|op| op.outcome.is_some()) {
                    finished += 1;
                }
            }
        }
        finished
    }
}
