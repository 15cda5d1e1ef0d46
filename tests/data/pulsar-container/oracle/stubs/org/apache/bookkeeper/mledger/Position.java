// Test stub: a (ledger, entry) position ordered as Pulsar's Position.compareTo orders them.
package org.apache.bookkeeper.mledger;

public final class Position implements Comparable<Position> {
    private final long ledgerId;
    private final long entryId;

    public Position(long ledgerId, long entryId) {
        this.ledgerId = ledgerId;
        this.entryId = entryId;
    }

    public long getLedgerId() {
        return ledgerId;
    }

    public long getEntryId() {
        return entryId;
    }

    @Override
    public int compareTo(Position o) {
        int byLedger = Long.compare(ledgerId, o.ledgerId);
        return byLedger != 0 ? byLedger : Long.compare(entryId, o.entryId);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Position p && p.ledgerId == ledgerId && p.entryId == entryId;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(ledgerId) * 31 + Long.hashCode(entryId);
    }

    @Override
    public String toString() {
        return ledgerId + ":" + entryId;
    }
}
