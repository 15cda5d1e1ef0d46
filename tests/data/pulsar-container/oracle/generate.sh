#!/usr/bin/env bash
# Regenerates the fixtures in tests/data/pulsar-container/ from Pulsar's own
# ActiveManagedCursorContainerImpl (master) and the JDK's ConcurrentHashMap.
#
# usage: bash tests/data/pulsar-container/oracle/generate.sh [PULSAR_GIT_DIR]
# needs: javac/java 17, commons-lang3 and guava jars (Debian: libcommons-lang3-java, libguava-java),
# python3, and a git checkout or bare mirror of apache/pulsar (default: the lab machine's mirror).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(dirname "$here")"
pulsar="${1:-/work/.mirror/ascentstream+pulsar/repo}"
jars="${JARS:-/usr/share/java/commons-lang3.jar:/usr/share/java/guava.jar}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

class=managed-ledger/src/main/java/org/apache/bookkeeper/mledger/impl/ActiveManagedCursorContainerImpl.java
commit="$(git -C "$pulsar" rev-parse master)"
mkdir -p "$work/src/org/apache/bookkeeper/mledger/impl"
# Only lombok's logging annotation is taken out (the class logs nothing); the logic is Pulsar's.
git -C "$pulsar" show "master:$class" \
    | sed -e '/^import lombok.CustomLog;$/d' -e '/^@CustomLog$/d' \
    > "$work/src/org/apache/bookkeeper/mledger/impl/ActiveManagedCursorContainerImpl.java"
mkdir -p "$work/classes"
javac -nowarn -d "$work/classes" -cp "$jars" \
    $(find "$here/stubs" -name '*.java') \
    "$work/src/org/apache/bookkeeper/mledger/impl/ActiveManagedCursorContainerImpl.java" \
    "$here/Oracle.java" "$here/ChmOrder.java"

python3 "$here/ops.py" "$work/ops"
java_version="$(java -version 2>&1 | head -1)"
for name in random-small random-tailing random-large; do
    {
        echo "# $name: answers of Pulsar's ActiveManagedCursorContainerImpl (apache/pulsar master $commit),"
        echo "# run by tests/data/pulsar-container/oracle/generate.sh on $java_version."
        java -cp "$work/classes:$jars" Oracle "$work/ops/$name.ops"
    } > "$out/$name.txt"
done
{
    echo "# chm-order: java.util.concurrent.ConcurrentHashMap<String, Object> iteration order,"
    echo "# run by tests/data/pulsar-container/oracle/generate.sh on $java_version."
    java -cp "$work/classes" ChmOrder "$work/ops/chm-order.ops"
} > "$out/chm-order.txt"
ls -la "$out"/*.txt
