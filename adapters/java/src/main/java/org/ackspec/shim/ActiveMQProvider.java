package org.ackspec.shim;

import jakarta.jms.ConnectionFactory;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import java.util.ArrayList;
import java.util.List;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQMessageConsumer;
import org.apache.activemq.transport.Transport;

/**
 * The ActiveMQ Classic client (OpenWire). The options map onto its {@code jms.*} URL options:
 * blockOnDurableSend=false is {@code jms.useAsyncSend}, blockOnNonDurableSend is
 * {@code jms.alwaysSyncSend}, blockOnAcknowledge is {@code jms.sendAcksAsync=false}. The acknowledgements
 * the client writes are seen by an {@link AckWitness} on its own transport chain (the factory's protected
 * createTransport is the library's extension point for that), which also holds the broker's answers to the
 * requests that wait for one ({@link OpenWireGate}).
 */
final class ActiveMQProvider implements Provider {
    private final AckNames names = new AckNames();
    private volatile Events events;
    private volatile OpenWireGate gate = new OpenWireGate(null);

    @Override
    public String name() {
        return "activemq-client " + libraryVersion();
    }

    @Override
    public String library() {
        return "org.apache.activemq:activemq-client";
    }

    @Override
    public String protocol() {
        return "openwire";
    }

    @Override
    public List<String> features() {
        // no async-send (so no callback-actions, message-access): activemq-client 6.1.8 implements no
        // CompletionListener; send(destination, message, mode, priority, ttl, listener) throws
        // java.lang.UnsupportedOperationException "... is not supported" (seen 2026-11-26, apache/activemq#1714).
        // It has a JMSContext (ActiveMQContext: context), whose JMSProducer.setAsync throws the same
        // UnsupportedOperationException "setAsync(CompletionListener) is not supported" (seen 2026-11-27)
        return List.of("sync-send-confirmed", "transactions", "ack-modes", "ack-types", "listener", "recover",
                "selector", "prefetch", "close-consumer", "dispatch-events", "send-flags", "context");
    }

    @Override
    public ConnectionFactory factory(String host, int port, Options options) throws ShimError {
        List<String> params = new ArrayList<>();
        if (Boolean.FALSE.equals(options.flag("block_on_durable_send"))) {
            params.add("jms.useAsyncSend=true");
        }
        if (Boolean.TRUE.equals(options.flag("block_on_non_durable_send"))) {
            params.add("jms.alwaysSyncSend=true");
        }
        if (Boolean.TRUE.equals(options.flag("block_on_acknowledge"))) {
            params.add("jms.sendAcksAsync=false");
        }
        Long prefetch = options.integer("prefetch");
        if (prefetch != null) {
            params.add("jms.prefetchPolicy.all=" + prefetch);
        }
        Boolean optimize = options.flag("optimize_acknowledge");
        if (optimize != null) {
            params.add("jms.optimizeAcknowledge=" + optimize);
        }
        Double timeout = options.number("optimize_acknowledge_timeout");
        if (timeout != null) {
            params.add("jms.optimizeAcknowledgeTimeOut=" + Math.round(timeout * 1000));
        }
        Long redeliveries = options.integer("maximum_redeliveries");
        if (redeliveries != null) {
            params.add("jms.redeliveryPolicy.maximumRedeliveries=" + redeliveries);
        }
        options.refuseUnused("activemq-client");
        return new WitnessedFactory("tcp://" + host + ":" + port + Provider.query(params));
    }

    @Override
    public void events(Events sink) {
        this.events = sink;
        this.gate = new OpenWireGate(sink);
    }

    @Override
    public OpenWireGate gate() {
        return gate;
    }

    @Override
    public String messageHandle(Message message, Handles<Message> received) throws JMSException {
        names.reserveWith(received::reserve);
        String handle = names.message(message.getJMSMessageID());
        received.put(handle, message);
        return handle;
    }

    @Override
    public void consumerCreated(MessageConsumer consumer, String handle) {
        if (consumer instanceof ActiveMQMessageConsumer openwire) {
            names.consumer(openwire.getConsumerId().toString(), handle);
        }
    }

    /** The library's factory with every connection's transport wrapped in an {@link AckWitness}. */
    private final class WitnessedFactory extends ActiveMQConnectionFactory {
        WitnessedFactory(String url) {
            super(url);
        }

        @Override
        protected Transport createTransport() throws JMSException {
            return new AckWitness(super.createTransport(), events, names, gate);
        }
    }

    @Override
    public int individualAcknowledge() {
        return 4;
    }

    @Override
    public Destination destination(Destinations where, String name) throws JMSException {
        String plain = Provider.strip(name);
        return name.startsWith("/queue/") ? where.queue(plain) : where.topic(plain);
    }

    /** ActiveMQ reads a consumer's own prefetch from its destination's options (consumer.prefetchSize). */
    @Override
    public Destination withPrefetch(Destinations session, String name, long prefetch) throws JMSException {
        return destination(session, name + "?consumer.prefetchSize=" + prefetch);
    }
}
