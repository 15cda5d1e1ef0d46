//! Cursors that survive reopening the managed ledger (Pulsar's durable cursors): after each change
//! to what Pulsar persists of a cursor (its mark-delete position and individually deleted ranges)
//! the ledger hands the store a [`CursorUpdate`], under the ledger's lock so the store sees the
//! changes in the order they were made; at open, and when a cursor that is not open is opened
//! again, the store's state is restored as `ManagedCursorImpl.recoverFromLedger` /
//! `recoveredCursor` restore it. Stores that keep no cursors (`MemoryStorage`) cost nothing here.

use super::cursor::CursorState;
use super::{ManagedCursor, ManagedLedger, State};
use crate::broker::cursors::java_hash_map::java_string_hash;
use crate::broker::positions::layout::Layout;
use crate::broker::storage::{CursorUpdate, DurableCursor, StorageHandle};
use crate::cache::position::Position;
use crate::error::{Error, Result};

fn snapshot(c: &CursorState) -> DurableCursor {
    DurableCursor {
        name: c.name.clone(),
        mark_delete: c.mark_delete,
        acked: c.acked.iter().collect(),
    }
}

/// Persists a cursor's whole state (a new cursor, a reset, a skip, a cleared backlog).
pub(super) fn persist_full(storage: &StorageHandle, owner: &str, c: &CursorState) -> Result<()> {
    if !storage.keeps_cursors() {
        return Ok(());
    }
    storage.persist_cursor(owner, &CursorUpdate::Full(&snapshot(c)))
}

/// Persists an acknowledgement of `acked` (or a mark-delete, with `None`) just applied to `c`.
pub(super) fn persist_acked(
    storage: &StorageHandle,
    owner: &str,
    c: &CursorState,
    acked: Option<Position>,
) -> Result<()> {
    if !storage.keeps_cursors() {
        return Ok(());
    }
    storage.persist_cursor(
        owner,
        &CursorUpdate::Acked {
            name: &c.name,
            // Only a position still held on its own: one the mark-delete position absorbed, or
            // one the ack refused, is carried by `mark_delete` or is nothing.
            acked: acked.filter(|&p| c.acked.contains(p)),
            mark_delete: c.mark_delete,
        },
    )
}

/// A cursor as recovery leaves it (`ManagedCursorImpl.recoveredCursor`): the persisted
/// mark-delete position and ranges, the read position at the entry after the mark-delete
/// position; inactive until opened. Whatever the ledgers no longer hold is dropped: ranges in
/// deleted ledgers, and a mark-delete position in a deleted ledger or past the last entry (entries
/// an OS crash lost under `sync="never"`) moves to the nearest one that exists.
fn recovered(d: &DurableCursor, layout: &Layout) -> CursorState {
    let mut md = d.mark_delete;
    if layout.get(md.ledger_id).is_none() && !layout.ledgers.is_empty() {
        md = layout.before(layout.normalize(md));
    }
    md = md.min(layout.before(layout.end()));
    let mut c = CursorState::new(&d.name, layout.next_after(md), layout, false);
    c.mark_delete = md;
    for &(ledger, first, last) in &d.acked {
        if layout.get(ledger).is_some() {
            c.acked.insert(ledger, first, last);
        }
    }
    c.acked.remove_through(md);
    c
}

/// Adds a recovered cursor to the ledger's cursors; returns its id.
fn add(st: &mut State, c: CursorState) -> u32 {
    let id = st.cursors.len() as u32;
    st.by_name.insert(c.name.clone(), id);
    st.activity.name(id, java_string_hash(&c.name));
    st.cursors.push(Some(c));
    st.recovered_cursors.insert(id);
    id
}

/// Pulsar's `maybeUpdateCursorBeforeTrimmingConsumedLedger`, run after a factory opens a managed
/// ledger and after each ledger it creates: a cursor whose mark-delete position is the last entry
/// of a ledger with a ledger after it moves to `(next,-1)`, and the move is persisted (Pulsar
/// 4.x, apache/pulsar#25087). Nothing is read or acknowledged by it: the read position is already
/// the next ledger's first entry. Returns the first store error after moving every cursor; a
/// caller drops it, as Pulsar does (the next open or rollover moves the cursor again): neither an
/// open (a read-only store cannot persist) nor an add that stored its entry fails for it.
pub(super) fn advance_consumed(st: &mut State, storage: &StorageHandle, owner: &str) -> Result<()> {
    let mut first_err = None;
    let layout = &st.layout;
    for c in st.cursors.iter_mut().flatten() {
        let md = c.mark_delete;
        let Ok(i) = layout.index_of(md.ledger_id) else {
            continue;
        };
        let Some(next) = layout.ledgers.get(i + 1) else {
            continue;
        };
        let entries = layout.ledgers[i].entries;
        if md.entry_id < 0 || u64::try_from(md.entry_id).map_or(true, |e| e + 1 < entries) {
            continue;
        }
        c.mark_delete = Position::new(next.id, -1);
        c.acked.remove_through(c.mark_delete);
        c.read_position = c.read_position.max(layout.next_after(c.mark_delete));
        if let Err(e) = persist_full(storage, owner, c) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Restores every cursor the store keeps for `owner` into a ledger being opened.
pub(super) fn restore_all(st: &mut State, storage: &StorageHandle, owner: &str) -> Result<()> {
    for d in storage.load_cursors(owner)? {
        let c = recovered(&d, &st.layout);
        add(st, c);
    }
    Ok(())
}

/// The cursor `name` as the store keeps it, if it does (a cursor closed and opened again).
pub(super) fn restore_one(
    st: &mut State,
    storage: &StorageHandle,
    owner: &str,
    name: &str,
) -> Result<Option<u32>> {
    if !storage.keeps_cursors() {
        return Ok(None);
    }
    let found = storage
        .load_cursors(owner)?
        .into_iter()
        .find(|d| d.name == name);
    Ok(found.map(|d| {
        let c = recovered(&d, &st.layout);
        add(st, c)
    }))
}

impl ManagedLedger {
    /// Deletes the cursor `name` (Pulsar's `deleteCursor`): it is closed and, on a store that
    /// keeps cursors, forgotten there too, so reopening the ledger does not bring it back. An
    /// error if the ledger has no such cursor, open or kept.
    pub fn delete_cursor(&self, name: &str) -> Result<()> {
        let storage = &self.inner.storage;
        if let Some(cursor) = self.cursor(name) {
            cursor.close()?;
        } else if !storage
            .load_cursors(&self.inner.name)?
            .iter()
            .any(|d| d.name == name)
        {
            return Err(Error::not_found("cursor", name));
        }
        let st = self.inner.state.lock();
        if storage.keeps_cursors() {
            storage.persist_cursor(&self.inner.name, &CursorUpdate::Deleted { name })?;
        }
        drop(st);
        Ok(())
    }
}

impl ManagedCursor {
    /// Persists the cursor's whole state after a change that is not a plain acknowledgement.
    pub(super) fn persist_state(&self) -> Result<()> {
        let l = &self.ledger;
        if !l.inner.storage.keeps_cursors() {
            return Ok(());
        }
        l.with_cursor(self.id, |c, _| {
            persist_full(&l.inner.storage, &l.inner.name, c)
        })
    }
}
