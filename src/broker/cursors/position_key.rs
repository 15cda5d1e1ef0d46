//! A [`Position`] packed into one `u128` that orders the same way: the searches of
//! [`super::position_counts`] then compare with one unsigned comparison (two machine compares, no
//! branch) instead of `Position`'s ledger-then-entry comparison, whose branch the processor cannot
//! predict in a binary search.

use crate::cache::position::Position;

/// Flipping the sign bit maps `i64` onto `u64` keeping the order (`i64::MIN` -> 0, -1 -> 2^63 - 1,
/// 0 -> 2^63).
const SIGN: u64 = 1 << 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct PositionKey(u128);

impl PositionKey {
    pub fn of(p: Position) -> Self {
        let ledger = (p.ledger_id as u64 ^ SIGN) as u128;
        let entry = (p.entry_id as u64 ^ SIGN) as u128;
        PositionKey(ledger << 64 | entry)
    }

    /// How far `self` lies above `base`, if `base <= self` and the distance fits in a `u32`.
    pub fn offset_from(self, base: PositionKey) -> Option<u32> {
        u32::try_from(self.0.checked_sub(base.0)?).ok()
    }

    /// The key `offset` above `self`; the caller knows that it exists (it was a key's offset).
    pub fn plus(self, offset: u32) -> PositionKey {
        PositionKey(self.0 + u128::from(offset))
    }

    pub fn position(self) -> Position {
        let ledger = ((self.0 >> 64) as u64 ^ SIGN) as i64;
        let entry = (self.0 as u64 ^ SIGN) as i64;
        Position::new(ledger, entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_positions_and_round_trips() {
        let values = [
            i64::MIN,
            i64::MIN + 1,
            -7,
            -1,
            0,
            1,
            7,
            i64::MAX - 1,
            i64::MAX,
        ];
        let positions: Vec<Position> = values
            .iter()
            .flat_map(|&l| values.iter().map(move |&e| Position::new(l, e)))
            .collect();
        for &a in &positions {
            assert_eq!(PositionKey::of(a).position(), a);
            for &b in &positions {
                assert_eq!(
                    PositionKey::of(a).cmp(&PositionKey::of(b)),
                    a.cmp(&b),
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn offsets_fit_in_u32_only() {
        let base = PositionKey::of(Position::new(3, 10));
        let at = |l, e| PositionKey::of(Position::new(l, e));
        assert_eq!(at(3, 10).offset_from(base), Some(0));
        assert_eq!(
            at(3, 10 + u32::MAX as i64).offset_from(base),
            Some(u32::MAX)
        );
        assert_eq!(at(3, 11 + u32::MAX as i64).offset_from(base), None);
        assert_eq!(at(3, 9).offset_from(base), None);
        assert_eq!(at(4, 0).offset_from(base), None);
    }
}
