package org.ackspec.shim;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What both in-client gates ({@link CoreGate}, {@link OpenWireGate}) keep the same way: the requests the client
 * wrote, on one sequence that also numbers the test's releases (so "released before the next request" is seen,
 * not timed); the gates the test opened; and the answers held on the caller's thread until released.
 *
 * <p>Only how a request is recognised and how a held answer goes back to the client differ per protocol: those
 * stay in the gates.
 */
final class RequestLog {
    /** A request the client wrote: its place on the sequence, kind, destination, and whether it was windowed. */
    record Request(int index, String command, String destination, boolean windowed) {}

    private record Gate(String command, String destination) {}

    /** How long a held answer is kept at most (a test releases it within seconds; this only bounds a stuck one). */
    private static final long HOLD_LIMIT_SECONDS = 60;

    private final Events events;
    private final AtomicInteger sequence = new AtomicInteger();
    private final AtomicInteger gateIds = new AtomicInteger();
    private final Map<Integer, Gate> gates = new ConcurrentHashMap<>();
    private final Map<Integer, CountDownLatch> held = new ConcurrentHashMap<>();
    private final Map<Integer, Integer> releasedAt = new ConcurrentHashMap<>();
    private final List<Request> log = new ArrayList<>();

    RequestLog(Events events) {
        this.events = events;
    }

    /** The next position on the sequence. */
    int next() {
        return sequence.incrementAndGet();
    }

    /** Notes a request the client wrote. */
    Request add(Request request) {
        synchronized (log) {
            log.add(request);
        }
        return request;
    }

    /** Opens a gate on a kind of request ({@code command}), optionally to one destination; returns its id. */
    int open(Map<String, Object> args) {
        Object destination = args.get("destination");
        int id = gateIds.incrementAndGet();
        gates.put(id, new Gate(String.valueOf(args.get("command")), destination == null ? null : destination.toString()));
        return id;
    }

    /** Stops the gate a release names when it asks to ({@code close} with {@code gate}). */
    void closeIfAsked(Map<String, Object> args) {
        if (Boolean.TRUE.equals(args.get("close"))) {
            gates.remove(((Number) args.get("gate")).intValue());
        }
    }

    /** Whether an open gate holds this request's answer. */
    boolean matching(Request request) {
        for (Gate gate : gates.values()) {
            if (gate.command().equals(request.command())
                    && (gate.destination() == null || gate.destination().equals(request.destination()))) {
                return true;
            }
        }
        return false;
    }

    /** Announces the held answer and keeps the calling thread until it is released (or the hold limit passes). */
    void hold(Request request) {
        CountDownLatch latch = new CountDownLatch(1);
        held.put(request.index(), latch);
        events.emit("gate-held", "id", request.index(), "command", request.command(),
                "destination", request.destination());
        try {
            latch.await(HOLD_LIMIT_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            held.remove(request.index());
        }
    }

    /** Whether the answer to this request is held on a caller's thread now. */
    boolean isHeld(int index) {
        return held.containsKey(index);
    }

    /** Releases one held answer ({@code id}) or, with null, every one; notes where each release fell. */
    void releaseHeld(Object id) {
        for (Map.Entry<Integer, CountDownLatch> entry : held.entrySet()) {
            if (id == null || ((Number) id).intValue() == entry.getKey()) {
                markReleased(entry.getKey());
                entry.getValue().countDown();
            }
        }
    }

    /** Notes, once, where on the sequence the test released (or rejected) this answer. */
    void markReleased(int index) {
        releasedAt.putIfAbsent(index, next());
    }

    /** The position at which the test released the held answer {@code id}, or null. */
    Object releasedAt(Map<String, Object> args) {
        return releasedAt.get(((Number) args.get("id")).intValue());
    }

    /** The position of the first request of this kind (and destination) the client wrote, or null. */
    Object firstSeen(Map<String, Object> args) {
        synchronized (log) {
            return log.stream().filter(r -> sameKind(r, args)).map(Request::index).findFirst().orElse(null);
        }
    }

    /** How many requests of this kind (and destination) the client wrote; windowed ones only if asked. */
    long count(Map<String, Object> args, boolean windowedOnly) {
        synchronized (log) {
            return log.stream().filter(r -> sameKind(r, args) && (!windowedOnly || r.windowed())).count();
        }
    }

    /** Stops every gate and lets every held answer through. */
    void clear() {
        gates.clear();
        held.values().forEach(CountDownLatch::countDown);
    }

    private static boolean sameKind(Request request, Map<String, Object> args) {
        Object destination = args.get("destination");
        return request.command().equals(String.valueOf(args.get("command")))
                && (destination == null || destination.toString().equals(request.destination()));
    }
}
