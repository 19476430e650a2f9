package org.ackspec.shim;

import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Destination;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSProducer;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The simplified API of Jakarta Messaging (JMSContext), which the section 7.3 rules name beside the session:
 * closing a context waits for its sends' callbacks, and a callback may not close, commit or roll back its own
 * context. Libraries implement it apart from the classic API (Qpid JMS {@code JmsContext}, Artemis
 * {@code ActiveMQJMSContext}), so it is driven through its own calls, never through a session.
 *
 * <p>{@code context} creates one from the connection factory of {@code open} (its own connection, through the
 * same relay and confirmation gates). A context handle stands for a session in {@code producer}, {@code commit}
 * and {@code rollback}; a send through a context's producer is
 * {@code context.createProducer().setDeliveryMode(m).setAsync(listener).send(destination, message)}, a fresh
 * JMSProducer per send (JMSProducer is a settings holder: its async listener would otherwise carry over).
 */
final class Contexts {
    record ContextState(String handle, JMSContext context, AtomicInteger running) {}

    record ProducerState(String handle, ContextState context) {}

    /** What a completion callback may do to its own context (the session's close-producer/-connection are not its). */
    private static final Set<String> ACTIONS = Set.of("close-context", "commit", "rollback", "block");

    private final Driver driver;
    private final Handles<ContextState> contexts = new Handles<>("x");
    private final Handles<ProducerState> producers = new Handles<>("p");
    /** Contexts close_context was called on (returned or still inside a close that does not return). */
    private final Set<String> closing = ConcurrentHashMap.newKeySet();

    Contexts(Driver driver) {
        this.driver = driver;
    }

    boolean isContext(Object handle) {
        return contexts.has(handle);
    }

    boolean isProducer(Object handle) {
        return producers.has(handle);
    }

    /** {@code ConnectionFactory.createContext(sessionMode)}; an invalid mode is the library's to refuse. */
    Object context(Map<String, Object> args) throws Exception {
        boolean transacted = Boolean.TRUE.equals(args.get("transacted"));
        int mode = ((Number) args.getOrDefault("ack_mode", 1)).intValue();
        int libraryMode = mode == 4 ? driver.provider.individualAcknowledge() : mode;
        JMSContext context = driver.factory().createContext(transacted ? JMSContext.SESSION_TRANSACTED : libraryMode);
        ContextState state = new ContextState(contexts.reserve(), context, new AtomicInteger());
        contexts.put(state.handle(), state);
        return state.handle();
    }

    Object producer(Map<String, Object> args) throws ShimError {
        ProducerState state = new ProducerState(producers.reserve(), contexts.get(args.get("session")));
        state.context().context().createProducer();  // a closed context refuses here, as a session would
        producers.put(state.handle(), state);
        return state.handle();
    }

    Object send(Map<String, Object> args, boolean async) throws Exception {
        ContextState c = producers.get(args.get("producer")).context();
        JMSContext context = c.context();
        BytesMessage message = context.createBytesMessage();
        String handle = driver.fill(message, args);
        Destination destination = driver.destination(Provider.Destinations.of(context), args.get("destination"));
        JMSProducer producer = context.createProducer().setDeliveryMode(Driver.deliveryMode(args));
        if (!async) {
            producer.send(destination, message);
            return handle;
        }
        String action = Driver.callbackAction(args);
        if (action != null && !ACTIONS.contains(action)) {
            throw ShimError.badRequest("a context's callback can do " + ACTIONS + ", not " + action);
        }
        Completion.Scope scope = new Completion.Scope(c.handle(), c.running(), a -> act(a, c));
        CompletionListener listener = new Completion(driver, handle, scope, action);
        driver.asynchronously(() -> {
            producer.setAsync(listener).send(destination, message);
            return null;
        });
        return handle;
    }

    /** A completion callback's call on its own context; "ok" or the exception kind. */
    private static String act(String action, ContextState c) {
        return Actions.perform(action, Map.of(
                "close-context", () -> c.context().close(),
                "commit", () -> c.context().commit(),
                "rollback", () -> c.context().rollback()));
    }

    /** {@code commit} and {@code rollback} given a context handle. */
    Object call(Map<String, Object> args, String op) throws ShimError {
        JMSContext context = contexts.get(args.get("session")).context();
        if ("commit".equals(op)) {
            context.commit();
        } else {
            context.rollback();
        }
        return null;
    }

    /** {@code JMSContext.close()}, bounded like the connection's close. */
    Object close(Map<String, Object> args) throws Exception {
        ContextState c = contexts.get(args.get("context"));
        closing.add(c.handle());
        JMSContext context = c.context();
        Driver.bounded("JMSContext.close()", () -> {
            context.close();
            return null;
        });
        return null;
    }

    /**
     * Closes every context the test did not close, when the shim's connection is closed. One it closed is left
     * alone: a close that never returned (the Artemis client's, stuck inside a callback) holds the context's lock,
     * and a second close would only wait the bound out behind it.
     */
    void closeAll() throws Exception {
        for (ContextState c : contexts.all()) {
            if (closing.contains(c.handle())) {
                continue;
            }
            Driver.bounded("JMSContext.close()", () -> {
                c.context().close();
                return null;
            });
        }
    }
}
