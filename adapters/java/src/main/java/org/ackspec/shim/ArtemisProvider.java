package org.ackspec.shim;

import jakarta.jms.ConnectionFactory;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQSession;

/**
 * The Apache ActiveMQ Artemis JMS client (core protocol). The options map one to one onto its
 * connection URL parameters; prefetch maps onto {@code consumerWindowSize} only for 0 (no buffering),
 * since the window is counted in bytes, not messages. Without a {@code confirmation_window_size} the shim
 * sets {@link #DEFAULT_CONFIRMATION_WINDOW}: the Artemis manual makes a positive confirmationWindowSize the
 * condition of asynchronous send acknowledgements (CompletionListener included); with its default of -1
 * the client calls a CompletionListener as soon as the send is written, without any broker answer
 * (ClientProducerImpl.send in the 2.40 sources).
 */
final class ArtemisProvider implements Provider {
    private final Map<String, String> names = new ConcurrentHashMap<>();  // core address -> /queue/ or /topic/ name
    private CoreGate gate;
    /** One byte: the broker confirms every packet on its own, so each send's confirmation can be held. */
    static final long DEFAULT_CONFIRMATION_WINDOW = 1;

    @Override
    public void events(Events events) {
        gate = new CoreGate(events, address -> names.getOrDefault(address, address));
    }

    @Override
    public CoreGate gate() {
        return gate;
    }

    @Override
    public String name() {
        return "artemis-jakarta-client " + libraryVersion();
    }

    @Override
    public String library() {
        return "org.apache.activemq:artemis-jakarta-client";
    }

    @Override
    public String protocol() {
        return "core";
    }

    @Override
    public List<String> features() {
        return List.of("sync-send-confirmed", "async-send", "send-flags", "transactions", "confirmation-window",
                "callback-actions", "message-access", "ack-modes", "listener", "recover", "selector",
                "close-consumer", "context");
    }

    @Override
    public ConnectionFactory factory(String host, int port, Options options) throws ShimError {
        List<String> params = new ArrayList<>();
        params.add("reconnectAttempts=0");
        flag(params, options, "block_on_durable_send", "blockOnDurableSend");
        flag(params, options, "block_on_non_durable_send", "blockOnNonDurableSend");
        flag(params, options, "block_on_acknowledge", "blockOnAcknowledge");
        Long given = options.integer("confirmation_window_size");
        long window = given != null ? given : DEFAULT_CONFIRMATION_WINDOW;
        params.add("confirmationWindowSize=" + window);
        if (gate != null) {
            gate.windowConfigured(window > 0);
        }
        Long prefetch = options.integer("prefetch");
        if (prefetch != null && prefetch != 0) {
            throw ShimError.notApplicable("artemis counts its consumer window in bytes: no prefetch of " + prefetch
                    + " messages");
        }
        if (prefetch != null) {
            params.add("consumerWindowSize=0");
        }
        options.refuseUnused("artemis-jakarta-client");
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory("tcp://" + host + ":" + port
                + Provider.query(params));
        if (gate != null) {
            factory.getServerLocator().addOutgoingInterceptor(gate.outgoing());
            factory.getServerLocator().addIncomingInterceptor(gate.incoming());
        }
        return factory;
    }

    private static void flag(List<String> params, Options options, String option, String parameter) throws ShimError {
        Boolean value = options.flag(option);
        if (value != null) {
            params.add(parameter + "=" + value);
        }
    }

    @Override
    public int individualAcknowledge() {
        return 101;
    }

    @Override
    public Destination destination(Destinations where, String name) throws JMSException {
        String plain = Provider.strip(name);
        names.put(plain, name);
        return name.startsWith("/queue/") ? where.queue(plain) : where.topic(plain);
    }

    @Override
    public void sendAcknowledgements(Session session, SendAcks sink) throws ShimError {
        try {
            ((ActiveMQSession) session).getCoreSession().setSendAcknowledgementHandler(message -> {
                SimpleString handle = message.getSimpleStringProperty(SimpleString.of(SEND_PROPERTY));
                if (handle != null) {
                    sink.acknowledged(handle.toString());
                }
            });
        } catch (ClassCastException e) {
            throw ShimError.notApplicable("not an Artemis session");
        }
    }
}
