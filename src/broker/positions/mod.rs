//! Positions across a managed ledger's ledgers: which ledgers there are and how a read walks them
//! ([`layout`]), and a cursor's acknowledged ranges ([`acked`]). The ledger, the storage that
//! persists cursors, and the lab's simulations all count entries with these.

pub mod acked;
pub mod layout;
