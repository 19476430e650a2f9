package org.ackspec.shim;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.activemq.artemis.api.core.Interceptor;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.PacketImpl;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.SessionAcknowledgeMessage;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.SessionSendMessage;

/**
 * A confirmation gate for the core protocol, built from the Artemis client's own interceptors.
 *
 * <p>No proxy speaks core, so the shim holds the broker's answers inside the client: the outgoing
 * interceptor notes each blocking request (a send with {@code requiresResponse} — the blocking flag as
 * the wire carries it —, a commit, a rollback, an acknowledgement that asks for a response); the incoming
 * interceptor sees the response to it (a channel has at most one blocking request outstanding) and, if
 * a gate holds that kind of request, parks the connection's reader until the test releases it. Held
 * answers are therefore released in the order they came (all later traffic of that connection waits
 * behind them), and none can be turned into a rejection.
 */
final class CoreGate {
    /** A blocking request the client wrote, and whether its answer is held now. */
    record Request(int index, String command, String destination, boolean windowed) {}

    private record Gate(String command, String destination) {}

    private static final long HOLD_LIMIT_SECONDS = 60;

    private final Events events;
    private final Function<String, String> destinationName;
    private final AtomicInteger seen = new AtomicInteger();
    /** Blocking requests awaiting their answer, with their packets: the channel id is set only after interceptors. */
    private final List<Map.Entry<Packet, Request>> outstanding = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final Map<Integer, Gate> gates = new ConcurrentHashMap<>();
    private final Map<Integer, CountDownLatch> held = new ConcurrentHashMap<>();
    private final List<Request> log = new ArrayList<>();
    private final AtomicInteger gateIds = new AtomicInteger();
    /** Sends confirmed through the confirmation window (PACKETS_CONFIRMED), which this gate cannot hold. */
    private volatile boolean windowConfigured;
    private final ThreadLocal<Boolean> inAsyncSend = ThreadLocal.withInitial(() -> false);

    void windowConfigured(boolean configured) {
        windowConfigured = configured;
    }

    /** Marks the sends the calling thread makes as CompletionListener sends (confirmed asynchronously). */
    void asyncSend(boolean active) {
        inAsyncSend.set(active);
    }

    CoreGate(Events events, Function<String, String> destinationName) {
        this.events = events;
        this.destinationName = destinationName;
    }

    Interceptor outgoing() {
        return (packet, connection) -> {
            Request request = request(packet);
            if (request != null) {
                synchronized (log) {
                    log.add(request);
                }
                if (packet.isRequiresResponse() || isAlwaysBlocking(packet)) {
                    outstanding.add(Map.entry(packet, request));
                }
            }
            return true;
        };
    }

    Interceptor incoming() {
        return (packet, connection) -> {
            if (packet.getType() != PacketImpl.NULL_RESPONSE) {
                return true;  // sends, commits, rollbacks and acknowledgements are answered by a null response
            }
            Request answered = answeredBy(packet.getChannelID());
            if (answered != null && matching(answered)) {
                hold(answered);
            }
            return true;
        };
    }

    private Request answeredBy(long channel) {
        for (Map.Entry<Packet, Request> entry : outstanding) {
            if (entry.getKey().getChannelID() == channel && outstanding.remove(entry)) {
                return entry.getValue();
            }
        }
        return null;
    }

    private static boolean isAlwaysBlocking(Packet packet) {
        byte type = packet.getType();
        return type == PacketImpl.SESS_COMMIT || type == PacketImpl.SESS_ROLLBACK;
    }

    private Request request(Packet packet) {
        int index = seen.incrementAndGet();
        if (packet instanceof SessionSendMessage send) {
            String address = String.valueOf(send.getMessage().getAddress());
            boolean windowed = !send.isRequiresResponse() && (windowConfigured || inAsyncSend.get());
            return new Request(index, "SEND", destinationName.apply(address), windowed);
        }
        return switch (packet.getType()) {
            case PacketImpl.SESS_COMMIT -> new Request(index, "COMMIT", null, false);
            case PacketImpl.SESS_ROLLBACK -> new Request(index, "ABORT", null, false);
            case PacketImpl.SESS_ACKNOWLEDGE, PacketImpl.SESS_INDIVIDUAL_ACKNOWLEDGE ->
                packet instanceof SessionAcknowledgeMessage || packet.isRequiresResponse()
                    ? new Request(index, "ACK", null, false) : null;
            default -> null;
        };
    }

    private boolean matching(Request request) {
        for (Gate gate : gates.values()) {
            if (gate.command().equals(request.command())
                    && (gate.destination() == null || gate.destination().equals(request.destination()))) {
                return true;
            }
        }
        return false;
    }

    private void hold(Request request) {
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

    Object open(Map<String, Object> args) throws ShimError {
        if (windowConfigured) {
            throw ShimError.notApplicable("the core gate holds answers to blocking requests only; with a "
                    + "confirmation window the sends are confirmed by PACKETS_CONFIRMED, which it cannot hold");
        }
        Object destination = args.get("destination");
        int id = gateIds.incrementAndGet();
        gates.put(id, new Gate(String.valueOf(args.get("command")), destination == null ? null : destination.toString()));
        return id;
    }

    /** Releases one held answer (by id) or, without an id, every one; closing a gate stops it holding. */
    Object release(Map<String, Object> args) {
        Object id = args.get("id");
        if (Boolean.TRUE.equals(args.get("close"))) {
            gates.remove(((Number) args.get("gate")).intValue());
        }
        for (Map.Entry<Integer, CountDownLatch> entry : held.entrySet()) {
            if (id == null || ((Number) id).intValue() == entry.getKey()) {
                entry.getValue().countDown();
            }
        }
        return null;
    }

    Object clear() {
        gates.clear();
        held.values().forEach(CountDownLatch::countDown);
        return null;
    }

    /**
     * How many requests of this kind (and destination) the client wrote; with {@code windowed}, only those
     * confirmed through the confirmation window, whose answers this gate cannot hold.
     */
    Object seen(Map<String, Object> args) {
        String command = String.valueOf(args.get("command"));
        Object destination = args.get("destination");
        boolean windowedOnly = Boolean.TRUE.equals(args.get("windowed"));
        synchronized (log) {
            return log.stream().filter(r -> r.command().equals(command)
                    && (destination == null || destination.toString().equals(r.destination()))
                    && (!windowedOnly || r.windowed())).count();
        }
    }
}
