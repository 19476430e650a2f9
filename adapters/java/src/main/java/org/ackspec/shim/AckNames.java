package org.ackspec.shim;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The shim's handles for the client library's own ids (OpenWire consumer and message ids), so an
 * {@code ack} event names the same consumer and message handles the test got from consumer/receive.
 * A message's handle is fixed by its id the first time either side sees it: an ack may be written before
 * receive() returns the message it covers.
 */
final class AckNames {
    private final Map<String, String> consumers = new ConcurrentHashMap<>();
    private final Map<String, String> messages = new ConcurrentHashMap<>();
    private volatile Supplier<String> reserve;

    void consumer(String libraryId, String handle) {
        consumers.put(libraryId, handle);
    }

    String consumer(String libraryId) {
        return consumers.getOrDefault(libraryId, libraryId);
    }

    /** Where message handles come from (the shim's received-message handles). */
    void reserveWith(Supplier<String> supplier) {
        this.reserve = supplier;
    }

    String message(String libraryId) {
        Supplier<String> source = reserve;
        if (source == null) {
            return libraryId;
        }
        return messages.computeIfAbsent(libraryId, k -> source.get());
    }
}
