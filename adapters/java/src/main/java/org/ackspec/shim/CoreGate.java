package org.ackspec.shim;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
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
    private final Events events;
    private final RequestLog requests;
    private final Function<String, String> destinationName;
    /** Blocking requests awaiting their answer, with their packets: the channel id is set only after interceptors. */
    private final List<Map.Entry<Packet, RequestLog.Request>> outstanding = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Asynchronous answers kept from the client, by request index. */
    private final Map<Integer, Kept> kept = new ConcurrentHashMap<>();

    private record Kept(Packet response, Channel channel) {}

    private final java.util.Set<Integer> announced = ConcurrentHashMap.newKeySet();
    /** What the test decided for a held send (empty: released; else the refusal), for answers still to come. */
    private final Map<Integer, Optional<ActiveMQException>> decided = new ConcurrentHashMap<>();
    /** Whether the connection has a confirmation window, whose confirmations {@link #window} holds. */
    private volatile boolean windowConfigured;
    private final WindowGate window;
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
        this.requests = new RequestLog(events);
        this.destinationName = destinationName;
        this.window = new WindowGate(
                request -> request.command().equals("SEND") && requests.matching(request), this::heldInWindow);
    }

    Interceptor outgoing() {
        return (packet, connection) -> {
            RequestLog.Request request = request(packet);
            if (request != null) {
                requests.add(request);
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
            RequestLog.Request answered = answeredBy(packet.getChannelID(), packet.getCorrelationID());
            if (answered == null || !requests.matching(answered)) {
                return true;
            }
            if (packet.isResponseAsync() && packet.getCorrelationID() != -1
                    && connection instanceof CoreRemotingConnection core) {
                keep(answered, packet, core.getChannel(packet.getChannelID(), -1));
                return false;  // handed to the client on release (or replaced by an exception on reject)
            }
            requests.hold(answered);
            return true;
        };
    }

    /** The request a response answers: same channel and correlation id (-1 for a request without one). */
    private RequestLog.Request answeredBy(long channel, long correlation) {
        for (Map.Entry<Packet, RequestLog.Request> entry : outstanding) {
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

    private RequestLog.Request request(Packet packet) {
        int index = requests.next();
        if (packet instanceof SessionSendMessage send) {
            String address = String.valueOf(send.getMessage().getAddress());
            boolean windowed = !send.isRequiresResponse() && !windowConfigured && inAsyncSend.get();
            return new RequestLog.Request(index, "SEND", destinationName.apply(address), windowed);
        }
        return switch (packet.getType()) {
            case PacketImpl.SESS_COMMIT -> new RequestLog.Request(index, "COMMIT", null, false);
            case PacketImpl.SESS_ROLLBACK -> new RequestLog.Request(index, "ABORT", null, false);
            case PacketImpl.SESS_ACKNOWLEDGE, PacketImpl.SESS_INDIVIDUAL_ACKNOWLEDGE ->
                packet instanceof SessionAcknowledgeMessage || packet.isRequiresResponse()
                    ? new RequestLog.Request(index, "ACK", null, false) : null;
            default -> null;
        };
    }

    /**
     * Keeps an asynchronous answer (a response carrying the correlation id of its request: with a
     * confirmation window Artemis 2.40 asks one per send, CompletionListener and transacted sends included,
     * without blocking the sender) from the client: the reader goes on, so answers are held one by one and
     * released in any order, or replaced by an exception response (a rejection).
     */
    private void keep(RequestLog.Request request, Packet response, Channel channel) {
        kept.put(request.index(), new Kept(response, channel));
        announce(request);
        Optional<ActiveMQException> decision = decided.get(request.index());
        if (decision != null) {  // released or rejected while its confirmation was held, before this answer came
            deliver(request.index(), decision.orElse(null));
        }
    }

    /** One gate-held event per request, whichever of its answers (response, confirmation) came first. */
    private void announce(RequestLog.Request request) {
        if (announced.add(request.index())) {
            events.emit("gate-held", "id", request.index(), "command", request.command(),
                    "destination", request.destination());
        }
    }

    /** A confirmed send whose confirmation the window gate keeps from the client until released. */
    private void heldInWindow(RequestLog.Request request) {
        announce(request);
    }

    @Override
    public Object open(Map<String, Object> args) {
        return requests.open(args);
    }

    /** Releases one held answer (by id) or, without an id, every one; closing a gate stops it holding. */
    @Override
    public Object release(Map<String, Object> args) {
        Object id = args.get("id");
        requests.closeIfAsked(args);
        requests.releaseHeld(id);
        for (Integer index : List.copyOf(announced)) {
            if (id == null || ((Number) id).intValue() == index) {
                requests.markReleased(index);
                decided.putIfAbsent(index, Optional.empty());
                deliver(index, null);
            }
        }
        window.release(id == null ? null : ((Number) id).intValue());
        return null;
    }

    @Override
    public Object firstSeen(Map<String, Object> args) {
        return requests.firstSeen(args);
    }

    @Override
    public Object releasedAt(Map<String, Object> args) {
        return requests.releasedAt(args);
    }

    /** Replaces a kept answer by an exception response: the client sees the broker refuse that send. */
    @Override
    public Object reject(Map<String, Object> args) throws ShimError {
        int index = ((Number) args.get("id")).intValue();
        if (!announced.contains(index) || requests.isHeld(index)) {
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
        requests.clear();
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
        return requests.count(args, Boolean.TRUE.equals(args.get("windowed")));
    }
}
