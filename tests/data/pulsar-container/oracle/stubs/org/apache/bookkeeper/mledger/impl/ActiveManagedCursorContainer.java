// Test stub: the interface the container implements, with the methods it overrides.
package org.apache.bookkeeper.mledger.impl;

import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.Position;
import org.apache.commons.lang3.tuple.Pair;

public interface ActiveManagedCursorContainer extends Iterable<ManagedCursor> {
    void add(ManagedCursor cursor, Position position);

    ManagedCursor get(String name);

    boolean removeCursor(String name);

    Pair<Position, Position> cursorUpdated(ManagedCursor cursor, Position newPosition);

    void updateCursor(ManagedCursor cursor, Position newPosition);

    Position getSlowestCursorPosition();

    boolean isEmpty();

    int size();

    int getNumberOfCursorsAtSamePositionOrBefore(ManagedCursor cursor);

    boolean shouldCacheAddedEntry();
}
