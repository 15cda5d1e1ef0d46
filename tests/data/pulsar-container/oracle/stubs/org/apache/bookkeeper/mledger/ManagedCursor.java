// Test stub: only what ActiveManagedCursorContainerImpl calls on a cursor.
package org.apache.bookkeeper.mledger;

public interface ManagedCursor {
    String getName();
}
