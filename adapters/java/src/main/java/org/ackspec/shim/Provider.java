package org.ackspec.shim;

import jakarta.jms.ConnectionFactory;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import java.util.List;

/**
 * One JMS client library: how its connection factory is configured from the shim's options, what it
 * announces, and the few things JMS leaves to the provider (the individual-acknowledge mode's value,
 * destination names, extension hooks). Everything else is plain Jakarta Messaging in {@link Driver}.
 */
interface Provider {
    /** Library name and version, as announced in the hello line. */
    String name();

    /** The library's Maven coordinates (group:artifact), the hello line's {@code library}. */
    String library();

    /** The version of the library in the jar, the hello line's {@code library_version}. */
    default String libraryVersion() {
        String[] parts = library().split(":");
        return Versions.of(parts[0], parts[1]);
    }

    /** The wire protocol the library speaks: amqp, core or openwire. */
    String protocol();

    /** The shim protocol features this library really implements. */
    List<String> features();

    /** A connection factory for the broker at host:port (the shim's relay), configured from options. */
    ConnectionFactory factory(String host, int port, Options options) throws ShimError;

    /** The session mode value of this library's INDIVIDUAL_ACKNOWLEDGE (the protocol calls it 4). */
    int individualAcknowledge();

    /** A destination from a STOMP-style name (/queue/NAME, /topic/NAME), made by a session or a context. */
    default Destination destination(Destinations where, String name) throws JMSException {
        if (name.startsWith("/queue/")) {
            return where.queue(name);
        }
        return where.topic(name);
    }

    /**
     * What makes destinations: a Session or a JMSContext (the simplified API), which share the two calls but no
     * interface.
     */
    interface Destinations {
        Destination queue(String name) throws JMSException;

        Destination topic(String name) throws JMSException;

        static Destinations of(Session session) {
            return new Destinations() {
                @Override
                public Destination queue(String name) throws JMSException {
                    return session.createQueue(name);
                }

                @Override
                public Destination topic(String name) throws JMSException {
                    return session.createTopic(name);
                }
            };
        }

        static Destinations of(jakarta.jms.JMSContext context) {
            return new Destinations() {
                @Override
                public Destination queue(String name) {
                    return context.createQueue(name);
                }

                @Override
                public Destination topic(String name) {
                    return context.createTopic(name);
                }
            };
        }
    }

    /**
     * The destination a consumer with its own prefetch consumes from, where the library takes a prefetch per
     * consumer (ActiveMQ: the destination option consumer.prefetchSize); else the prefetch is the connection's.
     */
    default Destination withPrefetch(Destinations session, String name, long prefetch) throws JMSException, ShimError {
        throw ShimError.notApplicable(name() + ": prefetch is set on the connection (open option)");
    }

    /** The confirmation gate inside the client, where the library offers one (Artemis: interceptors; ActiveMQ: a transport filter). */
    default AnswerGate gate() throws ShimError {
        throw ShimError.notApplicable(name() + " has no confirmation gate");
    }

    /** Where the library's hooks report events (called once, before any connection). */
    default void events(Events events) {}

    /** The handle of a message the application received (a library that reports acks keys it by message id). */
    default String messageHandle(jakarta.jms.Message message, Handles<jakarta.jms.Message> received)
            throws JMSException {
        return received.add(message);
    }

    /** Tells the library's hooks the handle of a consumer it created. */
    default void consumerCreated(jakarta.jms.MessageConsumer consumer, String handle) throws JMSException {}

    /** Installs a send-acknowledgement handler on a session (Artemis only). */
    default void sendAcknowledgements(Session session, SendAcks sink) throws ShimError {
        throw ShimError.notApplicable(name() + " has no send-acknowledgement handler");
    }

    /** Where a send-acknowledgement handler reports the send whose confirmation came. */
    interface SendAcks {
        void acknowledged(String sendHandle);
    }

    /** The message property that carries a send's handle to a send-acknowledgement handler. */
    String SEND_PROPERTY = "ackspec_send";

    static String strip(String name) {
        if (name.startsWith("/queue/")) {
            return name.substring("/queue/".length());
        }
        if (name.startsWith("/topic/")) {
            return name.substring("/topic/".length());
        }
        return name;
    }

    /**
     * The URL query of the options, plus {@code $ACKSPEC_JMS_URL_OPTIONS} (a&amp;b, the library's own URL
     * options, appended last): how a run tries a library with settings other than its defaults.
     */
    static String query(List<String> params) {
        List<String> all = new java.util.ArrayList<>(params);
        String extra = System.getenv("ACKSPEC_JMS_URL_OPTIONS");
        if (extra != null && !extra.isBlank()) {
            all.add(extra.strip());
        }
        return all.isEmpty() ? "" : "?" + String.join("&", all);
    }
}
