//! Entry positions.

use std::fmt;

/// The position of an entry in a managed ledger: which ledger, and which entry in it.
/// Ordered by `(ledger_id, entry_id)`, as Pulsar orders `Position`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub ledger_id: i64,
    pub entry_id: i64,
}

impl Position {
    pub const fn new(ledger_id: i64, entry_id: i64) -> Self {
        Position {
            ledger_id,
            entry_id,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ledger_id, self.entry_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_ledger_then_entry() {
        let mut v = vec![
            Position::new(2, 0),
            Position::new(1, 9),
            Position::new(1, 2),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                Position::new(1, 2),
                Position::new(1, 9),
                Position::new(2, 0)
            ]
        );
        assert_eq!(Position::new(3, 5).to_string(), "3:5");
    }
}
