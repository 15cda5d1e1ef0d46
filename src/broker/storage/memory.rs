//! A store in memory: for tests, and for simulations that need no persistence.

use super::{check_range, Storage};
use crate::cache::entry::Payload;
use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::collections::BTreeMap;

#[derive(Default)]
struct Ledger {
    owner: String,
    entries: Vec<Payload>,
}

/// Ledgers kept in memory. Entries are shared, not copied, when read.
#[derive(Default)]
pub struct MemoryStorage {
    ledgers: RwLock<(i64, BTreeMap<i64, Ledger>)>,
}

impl MemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Storage for MemoryStorage {
    fn create_ledger(&self, owner: &str) -> Result<i64> {
        let mut guard = self.ledgers.write();
        let (next, ledgers) = &mut *guard;
        *next += 1;
        ledgers.insert(
            *next,
            Ledger {
                owner: owner.to_string(),
                entries: Vec::new(),
            },
        );
        Ok(*next)
    }

    fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>> {
        let guard = self.ledgers.read();
        Ok(guard
            .1
            .iter()
            .filter(|(_, l)| l.owner == owner)
            .map(|(id, l)| (*id, l.entries.len() as u64))
            .collect())
    }

    fn append(&self, ledger_id: i64, data: &[u8]) -> Result<i64> {
        let mut guard = self.ledgers.write();
        let ledger = guard
            .1
            .get_mut(&ledger_id)
            .ok_or_else(|| Error::not_found("ledger", ledger_id))?;
        ledger.entries.push(Payload::from(data.to_vec()));
        Ok(ledger.entries.len() as i64 - 1)
    }

    fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>> {
        let guard = self.ledgers.read();
        let ledger = guard
            .1
            .get(&ledger_id)
            .ok_or_else(|| Error::not_found("ledger", ledger_id))?;
        check_range(ledger_id, first, last, ledger.entries.len() as u64)?;
        Ok(ledger.entries[first as usize..=last as usize].to_vec())
    }

    fn delete_ledger(&self, ledger_id: i64) -> Result<()> {
        self.ledgers
            .write()
            .1
            .remove(&ledger_id)
            .map(|_| ())
            .ok_or_else(|| Error::not_found("ledger", ledger_id))
    }

    fn describe(&self) -> String {
        format!("MemoryStorage({} ledgers)", self.ledgers.read().1.len())
    }
}
