package org.ackspec.shim;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.activemq.artemis.api.core.Interceptor;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;
import org.apache.activemq.artemis.core.protocol.core.Channel;
import org.apache.activemq.artemis.core.protocol.core.CoreRemotingConnection;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.PacketImpl;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.ActiveMQExceptionMessage_V2;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.PacketsConfirmedMessage;
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
 * behind them), and none can be turned into a rejection. Sends confirmed through the confirmation window
 * ({@code PACKETS_CONFIRMED}: CompletionListener sends and SendAcknowledgementHandler sends with
 * {@code confirmationWindowSize > 0}) are held per send by {@link WindowGate} instead.
 */
final class CoreGate implements AnswerGate {
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
    /** Asynchronous answers kept from the client, by request index. */
    private final Map<Integer, Kept> kept = new ConcurrentHashMap<>();

    private record Kept(Packet response, Channel channel) {}

    private final java.util.Set<Integer> announced = ConcurrentHashMap.newKeySet();
    /** When each held answer was released, counted on the same sequence as the requests the client writes. */
    private final Map<Integer, Integer> releasedAt = new ConcurrentHashMap<>();
    /** What the test decided for a held send (empty: released; else the refusal), for answers still to come. */
    private final Map<Integer, Optional<ActiveMQException>> decided = new ConcurrentHashMap<>();
    private final List<Request> log = new ArrayList<>();
    private final AtomicInteger gateIds = new AtomicInteger();
    /** Whether the connection has a confirmation window, whose confirmations {@link #window} holds. */
    private volatile boolean windowConfigured;
    private final WindowGate window = new WindowGate(
            request -> request.command().equals("SEND") && matching(request), this::heldInWindow);
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
            if (windowConfigured) {  // a send completes on its correlated answer or its cumulative confirmation
                window.written(packet, request, connection.getID());
            }
            return true;
        };
    }

    Interceptor incoming() {
        return (packet, connection) -> {
            if (windowConfigured && packet instanceof PacketsConfirmedMessage confirmed
                    && connection instanceof CoreRemotingConnection core) {
                return window.confirmed(confirmed, core);
            }
            if (packet.getType() != PacketImpl.NULL_RESPONSE) {
                return true;  // sends, commits, rollbacks and acknowledgements are answered by a null response
            }
            Request answered = answeredBy(packet.getChannelID(), packet.getCorrelationID());
            if (answered == null || !matching(answered)) {
                return true;
            }
            if (packet.isResponseAsync() && packet.getCorrelationID() != -1
                    && connection instanceof CoreRemotingConnection core) {
                keep(answered, packet, core.getChannel(packet.getChannelID(), -1));
                return false;  // handed to the client on release (or replaced by an exception on reject)
            }
            hold(answered);
            return true;
        };
    }

    /** The request a response answers: same channel and correlation id (-1 for a request without one). */
    private Request answeredBy(long channel, long correlation) {
        for (Map.Entry<Packet, Request> entry : outstanding) {
            Packet request = entry.getKey();
            if (request.getChannelID() == channel && request.getCorrelationID() == correlation
                    && outstanding.remove(entry)) {
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
            boolean windowed = !send.isRequiresResponse() && !windowConfigured && inAsyncSend.get();
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

    /**
     * Keeps an asynchronous answer (a response carrying the correlation id of its request: with a
     * confirmation window Artemis 2.40 asks one per send, CompletionListener and transacted sends included,
     * without blocking the sender) from the client: the reader goes on, so answers are held one by one and
     * released in any order, or replaced by an exception response (a rejection).
     */
    private void keep(Request request, Packet response, Channel channel) {
        kept.put(request.index(), new Kept(response, channel));
        announce(request);
        Optional<ActiveMQException> decision = decided.get(request.index());
        if (decision != null) {  // released or rejected while its confirmation was held, before this answer came
            deliver(request.index(), decision.orElse(null));
        }
    }

    /** One gate-held event per request, whichever of its answers (response, confirmation) came first. */
    private void announce(Request request) {
        if (announced.add(request.index())) {
            events.emit("gate-held", "id", request.index(), "command", request.command(),
                    "destination", request.destination());
        }
    }

    /** A confirmed send whose confirmation the window gate keeps from the client until released. */
    private void heldInWindow(Request request) {
        announce(request);
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

    @Override
    public Object open(Map<String, Object> args) throws ShimError {
        Object destination = args.get("destination");
        int id = gateIds.incrementAndGet();
        gates.put(id, new Gate(String.valueOf(args.get("command")), destination == null ? null : destination.toString()));
        return id;
    }

    /** Releases one held answer (by id) or, without an id, every one; closing a gate stops it holding. */
    @Override
    public Object release(Map<String, Object> args) {
        Object id = args.get("id");
        if (Boolean.TRUE.equals(args.get("close"))) {
            gates.remove(((Number) args.get("gate")).intValue());
        }
        for (Map.Entry<Integer, CountDownLatch> entry : held.entrySet()) {
            if (id == null || ((Number) id).intValue() == entry.getKey()) {
                releasedAt.putIfAbsent(entry.getKey(), seen.incrementAndGet());
                entry.getValue().countDown();
            }
        }
        for (Integer index : List.copyOf(announced)) {
            if (id == null || ((Number) id).intValue() == index) {
                releasedAt.putIfAbsent(index, seen.incrementAndGet());
                decided.putIfAbsent(index, Optional.empty());
                deliver(index, null);
            }
        }
        window.release(id == null ? null : ((Number) id).intValue());
        return null;
    }

    /** The position of the first request of this kind (and destination) the client wrote, or null. */
    @Override
    public Object firstSeen(Map<String, Object> args) {
        String command = String.valueOf(args.get("command"));
        Object destination = args.get("destination");
        synchronized (log) {
            return log.stream().filter(r -> r.command().equals(command)
                    && (destination == null || destination.toString().equals(r.destination())))
                    .map(Request::index).findFirst().orElse(null);
        }
    }

    /** The position (on the requests' sequence) at which the test released this held answer, or null. */
    @Override
    public Object releasedAt(Map<String, Object> args) {
        return releasedAt.get(((Number) args.get("id")).intValue());
    }

    /** Replaces a kept answer by an exception response: the client sees the broker refuse that send. */
    @Override
    public Object reject(Map<String, Object> args) throws ShimError {
        int index = ((Number) args.get("id")).intValue();
        if (!announced.contains(index) || held.containsKey(index)) {
            throw ShimError.notApplicable("the core gate can reject only an asynchronous answer it keeps (one "
                    + "carrying a correlation id); a held blocking answer parks the connection's reader");
        }
        Object message = args.get("message");
        ActiveMQException refusal = new ActiveMQException(ActiveMQExceptionType.INTERNAL_ERROR,
                message == null ? "rejected by the ackspec core gate" : message.toString());
        decided.put(index, Optional.of(refusal));
        deliver(index, refusal);
        window.release(index);  // the cumulative confirmation goes on past it (the client finds no entry left)
        return null;
    }

    /** Hands a kept answer to the client: as the broker sent it, or replaced by this refusal. */
    private void deliver(int index, ActiveMQException refusal) {
        Kept answer = kept.remove(index);
        if (answer != null) {
            Packet response = refusal == null ? answer.response()
                    : new ActiveMQExceptionMessage_V2(answer.response().getCorrelationID(), refusal);
            response.setChannelID(answer.channel().getID());
            if (refusal != null) {
                response.encode(answer.channel().getConnection());  // sets the size the channel counts
            }
            answer.channel().handlePacket(response);
        }
    }

    @Override
    public Object clear() {
        gates.clear();
        held.values().forEach(CountDownLatch::countDown);
        List.copyOf(announced).forEach(index -> {
            decided.putIfAbsent(index, Optional.empty());
            deliver(index, null);
        });
        window.release(null);
        return null;
    }

    /**
     * How many requests of this kind (and destination) the client wrote; with {@code windowed}, only the
     * CompletionListener sends written without a confirmation window, which no broker answer confirms.
     */
    @Override
    public Object seen(Map<String, Object> args) {
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
