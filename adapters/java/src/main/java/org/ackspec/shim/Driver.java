package org.ackspec.shim;

import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.net.URI;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The shim's verbs as plain Jakarta Messaging calls on one connection of the chosen library.
 *
 * <p>Nothing here imitates a rule: a send is {@code MessageProducer.send}, a completion is the
 * library's own {@link CompletionListener} call, reported as an event from inside it. Consumers and
 * listeners are in {@link Consumers}.
 */
final class Driver {
    /** A session and the completion callbacks of it running now (JMS 7.3.8 counts them). */
    record SessionState(String handle, Session session, AtomicInteger running) {}

    record ProducerState(String handle, MessageProducer producer, SessionState session) {}

    private static final long CLOSE_LIMIT_SECONDS = 20;

    final Provider provider;
    final Events events;
    final Handles<SessionState> sessions = new Handles<>("s");
    final Handles<ProducerState> producers = new Handles<>("p");
    final Handles<Message> sends = new Handles<>("m");
    final Consumers consumers;
    final Contexts contexts;
    private volatile ConnectionFactory factory;
    private volatile Connection connection;
    private volatile Relay relay;
    private volatile boolean sendAckHandler;

    Driver(Provider provider, Events events) {
        this.provider = provider;
        this.events = events;
        this.consumers = new Consumers(this);
        this.contexts = new Contexts(this);
        provider.events(events);
    }

    Connection connection() throws ShimError {
        Connection c = connection;
        if (c == null) {
            throw new ShimError("IllegalStateError", "not connected");
        }
        return c;
    }

    /** The connection factory of {@code open}, for the JMSContexts of {@link Contexts} (each its own connection). */
    ConnectionFactory factory() throws ShimError {
        ConnectionFactory f = factory;
        if (f == null) {
            throw new ShimError("IllegalStateError", "not connected");
        }
        return f;
    }

    Object open(Map<String, Object> args) throws Exception {
        URI url = URI.create(String.valueOf(args.get("url")));
        @SuppressWarnings("unchecked")
        Options options = new Options((Map<String, Object>) args.get("options"));
        Relay r = new Relay(url.getHost(), url.getPort());
        try {
            ConnectionFactory f = provider.factory("127.0.0.1", r.port(), options);
            Connection c = f.createConnection();
            c.setExceptionListener(e -> System.err.println("ackspec-shim: connection exception: " + Errors.describe(e)));
            c.start();
            relay = r;
            factory = f;
            connection = c;
        } catch (Exception e) {
            r.close();
            throw e;
        }
        return null;
    }

    Object session(Map<String, Object> args) throws Exception {
        boolean transacted = Boolean.TRUE.equals(args.get("transacted"));
        int mode = ((Number) args.getOrDefault("ack_mode", 1)).intValue();
        int libraryMode = mode == 4 ? provider.individualAcknowledge() : mode;
        if (!transacted && mode != 4 && mode != 1 && mode != 2 && mode != 3) {
            libraryMode = mode;  // passed on unchanged: the library decides whether it is valid
        }
        Session s = connection().createSession(transacted, transacted ? Session.SESSION_TRANSACTED : libraryMode);
        SessionState state = new SessionState(sessions.reserve(), s, new AtomicInteger());
        sessions.put(state.handle(), state);
        if (sendAckHandler) {
            installSendAcks(state);
        }
        return state.handle();
    }

    Object producer(Map<String, Object> args) throws Exception {
        SessionState s = sessions.get(args.get("session"));
        ProducerState state = new ProducerState(producers.reserve(), s.session().createProducer(null), s);
        producers.put(state.handle(), state);
        return state.handle();
    }

    /**
     * A destination from a STOMP-style name. Any other name is no destination at all: the send is made
     * with none, which an unidentified producer must refuse in the caller (an error JMS finds in send).
     */
    Destination destination(Provider.Destinations where, Object name) throws JMSException {
        String text = String.valueOf(name);
        if (text.startsWith("/queue/") || text.startsWith("/topic/")) {
            return provider.destination(where, text);
        }
        return null;
    }

    Object send(Map<String, Object> args, boolean async) throws Exception {
        ProducerState p = producers.get(args.get("producer"));
        Session session = p.session().session();
        BytesMessage message = session.createBytesMessage();
        String handle = fill(message, args);
        int mode = deliveryMode(args);
        Destination destination = destination(Provider.Destinations.of(session), args.get("destination"));
        if (async) {
            Completion.Scope scope = new Completion.Scope(p.session().handle(), p.session().running(),
                    action -> act(action, p, p.session()));
            CompletionListener listener = new Completion(this, handle, scope, callbackAction(args));
            asynchronously(() -> {
                p.producer().send(destination, message, mode, Message.DEFAULT_PRIORITY, Message.DEFAULT_TIME_TO_LIVE,
                        listener);
                return null;
            });
        } else {
            p.producer().send(destination, message, mode, Message.DEFAULT_PRIORITY, Message.DEFAULT_TIME_TO_LIVE);
        }
        return handle;
    }

    /** Writes the request's body and properties into a new message and registers it; returns the send's handle. */
    String fill(BytesMessage message, Map<String, Object> args) throws JMSException {
        message.writeBytes(Base64.getDecoder().decode(String.valueOf(args.getOrDefault("body_b64", ""))));
        Object properties = args.get("properties");
        if (properties instanceof Map<?, ?> map) {
            for (Map.Entry<?, ?> e : map.entrySet()) {
                message.setStringProperty(e.getKey().toString(), String.valueOf(e.getValue()));
            }
        }
        String handle = sends.reserve();
        if (sendAckHandler) {
            message.setStringProperty(Provider.SEND_PROPERTY, handle);
        }
        sends.put(handle, message);
        return handle;
    }

    static int deliveryMode(Map<String, Object> args) {
        return Boolean.FALSE.equals(args.get("persistent")) ? DeliveryMode.NON_PERSISTENT : DeliveryMode.PERSISTENT;
    }

    static String callbackAction(Map<String, Object> args) {
        Object action = args.get("on_callback");
        return action == null ? null : action.toString();
    }

    /** Makes a CompletionListener send, marked as one for the Artemis client's gate (confirmed asynchronously). */
    void asynchronously(Callable<Void> send) throws Exception {
        CoreGate gate = provider instanceof ArtemisProvider artemis ? artemis.gate() : null;
        if (gate != null) {
            gate.asyncSend(true);
        }
        try {
            send.call();
        } finally {
            if (gate != null) {
                gate.asyncSend(false);
            }
        }
    }

    Object touchMessage(Map<String, Object> args) throws ShimError {
        Message message = sends.get(args.get("send"));
        try {
            message.getBody(byte[].class);
            return "ok";
        } catch (Exception e) {
            return Errors.kind(e);
        }
    }

    Object messageId(Map<String, Object> args) throws Exception {
        return sends.get(args.get("send")).getJMSMessageID();
    }

    Object setSendAckHandler() throws ShimError {
        sendAckHandler = true;
        for (SessionState s : sessions.all()) {
            installSendAcks(s);
        }
        return null;
    }

    private void installSendAcks(SessionState s) throws ShimError {
        provider.sendAcknowledgements(s.session(), send -> events.emit("send-ack", "send", send));
    }

    /** Performs a session-level call of a completion or message listener on its own objects. */
    String act(String action, ProducerState producer, SessionState session) {
        return Actions.perform(action, Map.of(
                "close-producer", () -> producer.producer().close(),
                "close-session", () -> session.session().close(),
                "close-connection", () -> connection().close(),
                "commit", () -> session.session().commit(),
                "rollback", () -> session.session().rollback()));
    }

    Object sessionCall(Map<String, Object> args, String op) throws Exception {
        SessionState s = sessions.get(args.get("session"));
        switch (op) {
            case "recover" -> s.session().recover();
            case "commit" -> s.session().commit();
            case "rollback" -> s.session().rollback();
            default -> s.session().close();
        }
        return null;
    }

    Object closeProducer(Map<String, Object> args) throws Exception {
        producers.get(args.get("producer")).producer().close();
        return null;
    }

    /** Closes the connection (and the contexts still open), bounded, then the relay. */
    Object close() throws Exception {
        Connection c = connection;
        if (c == null) {
            return null;
        }
        try {
            contexts.closeAll();
            bounded("Connection.close()", () -> {
                c.close();
                return null;
            });
        } finally {
            Relay r = relay;
            if (r != null) {
                r.close();
            }
        }
        return null;
    }

    /** Runs a close, bounded: a library that deadlocks in close is reported, not waited on forever. */
    static void bounded(String what, Callable<Void> closing) throws Exception {
        var executor = Executors.newSingleThreadExecutor(runnable -> {
            Thread t = new Thread(runnable, "ackspec-close");
            t.setDaemon(true);
            return t;
        });
        try {
            Future<?> done = executor.submit(closing);
            done.get(CLOSE_LIMIT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new ShimError("JMSError", what + " did not return within " + CLOSE_LIMIT_SECONDS + " s");
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        } finally {
            executor.shutdown();
        }
    }

    Object crash() throws ShimError {
        Relay r = relay;
        if (r == null) {
            throw new ShimError("IllegalStateError", "not connected");
        }
        r.crash();
        return null;
    }
}
