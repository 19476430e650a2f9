package org.ackspec.shim;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
    private final RequestLog requests;
    private final Map<Integer, String> refusals = new ConcurrentHashMap<>();

    OpenWireGate(Events events) {
        this.requests = new RequestLog(events);
    }

    /** Notes a command the client writes; null when it is none of the requests a gate can hold. */
    RequestLog.Request written(Object command) {
        String kind = kind(command);
        if (kind == null) {
            return null;
        }
        String destination = command instanceof Message message ? name(message.getDestination()) : null;
        return requests.add(new RequestLog.Request(requests.next(), kind, destination, false));
    }

    /**
     * The broker's answer to a request the client waits for: returned at once, unless a gate holds that kind;
     * then kept from the caller until released (or the hold limit passes), or replaced by a refusal.
     */
    Object answered(RequestLog.Request request, Object response) {
        if (request == null || !requests.matching(request)) {
            return response;
        }
        requests.hold(request);
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

    @Override
    public Object open(Map<String, Object> args) {
        return requests.open(args);
    }

    @Override
    public Object release(Map<String, Object> args) {
        requests.closeIfAsked(args);
        requests.releaseHeld(args.get("id"));
        return null;
    }

    @Override
    public Object reject(Map<String, Object> args) throws ShimError {
        int index = ((Number) args.get("id")).intValue();
        if (!requests.isHeld(index)) {
            throw ShimError.badRequest("no held answer " + index);
        }
        Object message = args.get("message");
        refusals.put(index, message == null ? "rejected by the ackspec OpenWire gate" : message.toString());
        requests.releaseHeld(index);
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

    @Override
    public Object clear() {
        requests.clear();
        return null;
    }

    /**
     * Requests of a kind written. {@code windowed} asks for CompletionListener sends written without a
     * confirmation window: the ActiveMQ client makes none (it has no CompletionListener), so there are none,
     * and a send that should have waited but went one way is a failure, not a rule that cannot be decided.
     */
    @Override
    public Object seen(Map<String, Object> args) {
        return Boolean.TRUE.equals(args.get("windowed")) ? 0 : requests.count(args, false);
    }
}
