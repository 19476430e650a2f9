package org.ackspec.shim;

import java.util.LinkedHashMap;
import java.util.Map;

/** Builds event details in the shape of docs/shim-protocol.md section 4. */
final class Events {
    private final Wire wire;

    Events(Wire wire) {
        this.wire = wire;
    }

    void emit(String kind, Object... pairs) {
        Map<String, Object> detail = new LinkedHashMap<>();
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            detail.put(pairs[i].toString(), pairs[i + 1]);
        }
        wire.event(kind, detail);
    }

    static long thread() {
        return Thread.currentThread().getId();
    }
}
