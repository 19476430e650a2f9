package org.ackspec.shim;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.activemq.command.ActiveMQDestination;
import org.apache.activemq.command.ExceptionResponse;
import org.apache.activemq.command.Message;
import org.apache.activemq.command.MessageAck;
import org.apache.activemq.command.Response;
import org.apache.activemq.command.TransactionInfo;

/**
 * A confirmation gate for OpenWire, on the ActiveMQ Classic client's own transport chain ({@link AckWitness}).
 *
 * <p>No proxy speaks OpenWire. The client makes a request that waits for the broker (a synchronous send: a
 * persistent message outside a transaction, or any with {@code alwaysSyncSend}; a commit; a rollback; an
 * acknowledgement with {@code sendAcksAsync=false}) through {@code Transport.request}, which returns the
 * broker's {@link Response}; everything else goes out one way and waits for nothing. The filter sees both:
 * each request is noted as it is written (so the test can count them and order them), and a request whose
 * kind a gate holds gets its broker Response kept from the calling thread until the test releases it, or
 * replaced by an {@link ExceptionResponse} (the broker refusing it) on reject. The caller is the
 * application's own thread, so the connection's other traffic goes on while one answer is held: "the send
 * has not returned while the broker's answer is held" is seen, not timed.
 */
final class OpenWireGate implements AnswerGate {
    /** A request the client wrote: its place on the sequence, kind, destination, and whether it waits. */
    record Request(int index, String command, String destination, boolean waits) {}

    private record Gate(String command, String destination) {}

    /** How long a held answer is kept at most (a test releases it within seconds; this only bounds a stuck one). */
    private static final long HOLD_LIMIT_SECONDS = 60;

    private final Events events;
    private final AtomicInteger sequence = new AtomicInteger();
    private final AtomicInteger gateIds = new AtomicInteger();
    private final Map<Integer, Gate> gates = new ConcurrentHashMap<>();
    private final Map<Integer, CountDownLatch> held = new ConcurrentHashMap<>();
    private final Map<Integer, String> refusals = new ConcurrentHashMap<>();
    private final Map<Integer, Integer> releasedAt = new ConcurrentHashMap<>();
    private final List<Request> log = new ArrayList<>();

    OpenWireGate(Events events) {
        this.events = events;
    }

    /** Notes a command the client writes; null when it is none of the requests a gate can hold. */
    Request written(Object command, boolean waits) {
        String kind = kind(command);
        if (kind == null) {
            return null;
        }
        String destination = command instanceof Message message ? name(message.getDestination()) : null;
        Request request = new Request(sequence.incrementAndGet(), kind, destination, waits);
        synchronized (log) {
            log.add(request);
        }
        return request;
    }

    /**
     * The broker's answer to a request the client waits for: returned at once, unless a gate holds that kind;
     * then kept from the caller until released (or the hold limit passes), or replaced by a refusal.
     */
    Object answered(Request request, Object response) {
        if (request == null || !matching(request)) {
            return response;
        }
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
        String refusal = refusals.remove(request.index());
        if (refusal == null || !(response instanceof Response answer)) {
            return response;
        }
        ExceptionResponse refused = new ExceptionResponse(new jakarta.jms.JMSException(refusal));
        refused.setCorrelationId(answer.getCorrelationId());
        return refused;
    }

    private static String kind(Object command) {
        if (command instanceof Message) {
            return "SEND";
        }
        if (command instanceof TransactionInfo tx) {
            return switch (tx.getType()) {
                case TransactionInfo.COMMIT_ONE_PHASE, TransactionInfo.COMMIT_TWO_PHASE -> "COMMIT";
                case TransactionInfo.ROLLBACK -> "ABORT";
                default -> null;
            };
        }
        return command instanceof MessageAck ? "ACK" : null;
    }

    /** The STOMP-style name the tests use for an OpenWire destination. */
    private static String name(ActiveMQDestination destination) {
        if (destination == null) {
            return null;
        }
        return (destination.isQueue() ? "/queue/" : "/topic/") + destination.getPhysicalName();
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

    @Override
    public Object open(Map<String, Object> args) {
        Object destination = args.get("destination");
        int id = gateIds.incrementAndGet();
        gates.put(id, new Gate(String.valueOf(args.get("command")), destination == null ? null : destination.toString()));
        return id;
    }

    @Override
    public Object release(Map<String, Object> args) {
        Object id = args.get("id");
        if (Boolean.TRUE.equals(args.get("close"))) {
            gates.remove(((Number) args.get("gate")).intValue());
        }
        for (Map.Entry<Integer, CountDownLatch> entry : held.entrySet()) {
            if (id == null || ((Number) id).intValue() == entry.getKey()) {
                releasedAt.putIfAbsent(entry.getKey(), sequence.incrementAndGet());
                entry.getValue().countDown();
            }
        }
        return null;
    }

    @Override
    public Object reject(Map<String, Object> args) throws ShimError {
        int index = ((Number) args.get("id")).intValue();
        CountDownLatch latch = held.get(index);
        if (latch == null) {
            throw ShimError.badRequest("no held answer " + index);
        }
        Object message = args.get("message");
        refusals.put(index, message == null ? "rejected by the ackspec OpenWire gate" : message.toString());
        releasedAt.putIfAbsent(index, sequence.incrementAndGet());
        latch.countDown();
        return null;
    }

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

    @Override
    public Object releasedAt(Map<String, Object> args) {
        return releasedAt.get(((Number) args.get("id")).intValue());
    }

    @Override
    public Object clear() {
        gates.clear();
        held.values().forEach(CountDownLatch::countDown);
        return null;
    }

    /**
     * Requests of a kind written. {@code windowed} asks for CompletionListener sends written without a
     * confirmation window: the ActiveMQ client makes none (it has no CompletionListener), so there are none,
     * and a send that should have waited but went one way is a failure, not a rule that cannot be decided.
     */
    @Override
    public Object seen(Map<String, Object> args) {
        if (Boolean.TRUE.equals(args.get("windowed"))) {
            return 0;
        }
        String command = String.valueOf(args.get("command"));
        Object destination = args.get("destination");
        synchronized (log) {
            return log.stream().filter(r -> r.command().equals(command)
                    && (destination == null || destination.toString().equals(r.destination()))).count();
        }
    }
}
