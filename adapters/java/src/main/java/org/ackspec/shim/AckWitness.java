package org.ackspec.shim;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.activemq.command.MessageAck;
import org.apache.activemq.command.MessageDispatch;
import org.apache.activemq.command.MessageId;
import org.apache.activemq.command.MessagePull;
import org.apache.activemq.transport.FutureResponse;
import org.apache.activemq.transport.ResponseCallback;
import org.apache.activemq.transport.Transport;
import org.apache.activemq.transport.TransportFilter;

/**
 * A filter on the ActiveMQ Classic client's own transport chain (installed by overriding the connection
 * factory's createTransport): it sees every command the client writes, so every {@link MessageAck} with
 * its type and range, and reports it as an {@code ack} event before forwarding it (a prefetch-0 MessagePull as
 * a {@code pull} event). It also notes the order
 * in which the broker dispatched message ids to each consumer, because an ack names only the first and last
 * id of its range and the test needs the ids it covers, and reports each {@link MessageDispatch} as a
 * {@code dispatch} event as it arrives: the acks written and the messages the broker pushed, on one
 * ordered stream, show how many messages the broker let the consumer hold (AMQ-PREFETCH-HELD-BOUND).
 * The requests that wait for the broker go through its {@link OpenWireGate}, which can hold their answers.
 */
final class AckWitness extends TransportFilter {
    private final Events events;
    private final AckNames names;
    private final Map<String, List<String>> dispatched = new ConcurrentHashMap<>();

    private final OpenWireGate gate;

    AckWitness(Transport next, Events events, AckNames names, OpenWireGate gate) {
        super(next);
        this.events = events;
        this.names = names;
        this.gate = gate;
    }

    @Override
    public void oneway(Object command) throws IOException {
        observe(command);
        gate.written(command);
        super.oneway(command);
    }

    /** A request answered through a callback (ActiveMQ's own AsyncCallback sends): noted, never held. */
    @Override
    public FutureResponse asyncRequest(Object command, ResponseCallback callback) throws IOException {
        observe(command);
        gate.written(command);
        return super.asyncRequest(command, callback);
    }

    @Override
    public Object request(Object command) throws IOException {
        observe(command);
        RequestLog.Request request = gate.written(command);
        return gate.answered(request, super.request(command));
    }

    @Override
    public Object request(Object command, int timeout) throws IOException {
        observe(command);
        RequestLog.Request request = gate.written(command);
        return gate.answered(request, super.request(command, timeout));
    }

    @Override
    public void onCommand(Object command) {
        if (command instanceof MessageDispatch dispatch && dispatch.getMessage() != null) {
            String consumerId = dispatch.getConsumerId().toString();
            String messageId = dispatch.getMessage().getMessageId().toString();
            List<String> ids = dispatched.computeIfAbsent(consumerId, k -> new ArrayList<>());
            synchronized (ids) {
                ids.add(messageId);
            }
            if (events != null) {  // before the client sees it: on one event stream with the acks it writes
                events.emit("dispatch", "consumer", names.consumer(consumerId), "message_id", messageId);
            }
        }
        super.onCommand(command);
    }

    private void observe(Object command) {
        if (events != null && command instanceof MessagePull pull) {
            events.emit("pull", "consumer", names.consumer(pull.getConsumerId().toString()));
        }
        if (!(command instanceof MessageAck ack) || events == null) {
            return;
        }
        String consumerId = ack.getConsumerId().toString();
        List<String> ids = covered(consumerId, ack);
        List<String> handles = new ArrayList<>(ids.size());
        for (String id : ids) {
            handles.add(names.message(id));
        }
        Throwable cause = ack.getPoisonCause();
        events.emit("ack", "ack_type", (int) ack.getAckType(), "consumer", names.consumer(consumerId),
                "messages", handles, "first", text(ack.getFirstMessageId()), "last", text(ack.getLastMessageId()),
                "count", ack.getMessageCount(), "transaction", ack.isInTransaction(), "reason", cause == null ? null : cause.toString());
    }

    /** The ids from first to last in the order they were dispatched to the consumer (the latest run of them). */
    private List<String> covered(String consumerId, MessageAck ack) {
        String last = text(ack.getLastMessageId());
        String first = ack.getFirstMessageId() == null ? last : text(ack.getFirstMessageId());
        List<String> ids = dispatched.getOrDefault(consumerId, List.of());
        synchronized (ids) {
            int end = ids.lastIndexOf(last);
            for (int start = end; start >= 0; start--) {
                if (ids.get(start).equals(first)) {
                    return new ArrayList<>(ids.subList(start, end + 1));
                }
            }
        }
        return first.equals(last) ? List.of(last) : List.of(first, last);
    }

    private static String text(MessageId id) {
        return id == null ? null : id.toString();
    }
}
