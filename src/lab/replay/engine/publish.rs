//! The ledger's ops: adds (publishes) and ledger deletions.

use super::super::trace::Event;
use super::{CacheStrategy, EntryKey, Replayer, Stopped};
use crate::broker::ledger::cursor::mark_delete_after_ledger_deleted;
use crate::broker::positions::layout::LedgerInfo;
use crate::error::Error;

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// A publish: the entry joins its ledger, and the read flow decides whether it is cached.
    pub(super) fn on_add(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        let (p, end) = Self::add_of(e)?;
        self.topic(e.topic);
        self.load_implicitly(e.topic, now);
        let t = &mut self.topics[e.topic as usize];
        match t.layout.ledgers.last_mut() {
            Some(l) if l.id == p.ledger_id => {
                l.entries = l.entries.max(end);
                l.bytes = l.bytes.saturating_add(u64::from(e.size));
            }
            Some(l) if l.id > p.ledger_id => {
                return Err(Error::invalid(
                    "trace",
                    format!(
                        "row {}: add to ledger {} after ledger {}",
                        e.row, p.ledger_id, l.id
                    ),
                )
                .into())
            }
            _ => t.layout.ledgers.push(LedgerInfo {
                id: p.ledger_id,
                entries: end,
                bytes: u64::from(e.size),
            }),
        }
        let newest = t.newest(p.ledger_id).is_some();
        let ledger = match t.entries.last_entry() {
            Some(last) if newest => last.into_mut(),
            _ => t.entries.entry(p.ledger_id).or_default(),
        };
        ledger.add(p.entry_id, e.size);
        let admitted = self
            .flow
            .on_add(&self.topics[e.topic as usize].activity, now);
        let key = EntryKey {
            topic: e.topic,
            position: p,
        };
        if let Some(log) = &mut self.requests {
            log.record(e.ts_us, key, e.size, false);
        }
        let watch = match &mut self.memory {
            Some(m) => m.on_publish(e.ts_us, e.topic, p, e.size),
            None => None,
        };
        match (admitted, watch) {
            // The entry starts a buffer the model follows: the design may watch it as it
            // caches it, sparing the model a lookup at its next sample.
            (Some(expected), Some(token)) => {
                if self
                    .strategy
                    .insert_watched(now, key, e.size, expected, token)
                {
                    if let Some(m) = &mut self.memory {
                        m.front_watched(token);
                    }
                }
            }
            (Some(expected), None) => self.strategy.insert(now, key, e.size, expected),
            (None, _) => {}
        }
        self.metrics.published_entries += 1;
        self.metrics.published_bytes += e.size as u64;
        self.publishes_since_forget += 1;
        if self.publishes_since_forget >= 4096 {
            self.publishes_since_forget = 0;
            for (id, t) in (0u32..).zip(&mut self.topics) {
                t.forget_read_entries(id, &self.cursors);
            }
        }
        Ok(())
    }

    /// A ledger deleted (trimmed): its entries, cursors' positions in it and storage reads of it go.
    pub(super) fn on_delete(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let ledger = Self::position_of(e)?.ledger_id;
        let t = self.topic(e.topic);
        t.layout.ledgers.retain(|l| l.id != ledger);
        t.entries.remove(&ledger);
        let t = &self.topics[e.topic as usize];
        let ids: Vec<u32> = t.cursor_ids.iter().copied().collect();
        let layout = &t.layout;
        for &id in &ids {
            let Some(c) = self.cursors.get_mut(e.topic, id) else {
                continue;
            };
            c.read_position = layout.normalize(c.read_position);
            if let Some(h) = &mut c.hold {
                h.at = layout.normalize(h.at);
            }
            c.mark_delete =
                mark_delete_after_ledger_deleted(c.mark_delete, c.read_position, ledger, layout);
            c.replay.retain(|p| p.ledger_id != ledger);
            c.acked.remove_ledger(ledger);
        }
        // The lab caches nothing of a ledger that is gone, so its storage reads under way
        // are dropped (a broker deletes only ledgers every cursor has passed).
        for r in &mut self.storage_reads {
            if (r.topic, r.ledger) == (e.topic, ledger) {
                r.dropped = true;
            }
        }
        self.storage_read_ranges.remove(&(e.topic, ledger));
        self.strategy.on_ledger_deleted(e.topic, ledger);
        for id in ids {
            self.cursor_moved(e.topic, id);
        }
        Ok(())
    }
}
