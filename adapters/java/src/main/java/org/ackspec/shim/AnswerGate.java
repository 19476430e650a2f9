package org.ackspec.shim;

import java.util.Map;

/**
 * A confirmation gate held inside the client, for a protocol no proxy speaks (the shim verbs {@code gate_*} of
 * docs/shim-protocol.md): Artemis core through the client's interceptors ({@link CoreGate}), OpenWire through
 * a filter on the ActiveMQ client's transport chain ({@link OpenWireGate}).
 */
interface AnswerGate {
    /** Starts holding the answers to requests of a kind ({@code command}), optionally to one destination. */
    Object open(Map<String, Object> args) throws ShimError;

    /** Releases one held answer ({@code id}) or every one; {@code close} with {@code gate} stops that gate. */
    Object release(Map<String, Object> args);

    /** Replaces a held answer by a refusal, where the gate can. */
    Object reject(Map<String, Object> args) throws ShimError;

    /** Where the first request of a kind falls on the sequence numbering requests and releases, or null. */
    Object firstSeen(Map<String, Object> args);

    /** Where the release of a held answer fell on that sequence, or null. */
    Object releasedAt(Map<String, Object> args);

    /** Stops every gate and lets everything held through. */
    Object clear();

    /** How many requests of a kind (and destination) the client wrote. */
    Object seen(Map<String, Object> args);
}
