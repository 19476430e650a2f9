package org.ackspec.shim;

import jakarta.jms.CompletionListener;
import jakarta.jms.Message;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;

/**
 * The CompletionListener of one asynchronous send. It reports from inside the library's callback,
 * before returning, with the callback's thread, the sending thread and how many callbacks of the
 * session (or context) are running at that moment; then performs the requested action on its own objects,
 * or with {@code block} stays running until {@code release_listeners} (so a test can close while it runs).
 */
final class Completion implements CompletionListener {
    /**
     * Where a callback runs: the session or JMSContext whose callbacks JMS 7.3.8 serialises (its handle and the
     * callbacks of it running now), and what an action of the callback does to its own objects (the outcome:
     * "ok" or the exception kind).
     */
    record Scope(String handle, AtomicInteger running, UnaryOperator<String> actor) {}

    private final Driver driver;
    private final String send;
    private final Scope scope;
    private final String action;
    private final long senderThread = Events.thread();  // built on the sending thread

    Completion(Driver driver, String send, Scope scope, String action) {
        this.driver = driver;
        this.send = send;
        this.scope = scope;
        this.action = action;
    }

    @Override
    public void onCompletion(Message message) {
        report("completion", null);
    }

    @Override
    public void onException(Message message, Exception exception) {
        report("exception", exception);
    }

    private void report(String kind, Exception exception) {
        int concurrent = scope.running().incrementAndGet();
        try {
            if (exception == null) {
                driver.events.emit(kind, "send", send, "thread", Events.thread(), "sender_thread", senderThread,
                        "session", scope.handle(), "concurrent", concurrent);
            } else {
                driver.events.emit(kind, "send", send, "thread", Events.thread(), "sender_thread", senderThread,
                        "session", scope.handle(), "concurrent", concurrent, "error", Errors.describe(exception));
            }
            if ("block".equals(action)) {
                driver.events.emit("callback-blocked", "send", send);
                driver.consumers.awaitRelease();
            } else if (action != null) {
                driver.events.emit("callback-result", "action", action, "outcome",
                        scope.actor().apply(action));
            }
        } finally {
            scope.running().decrementAndGet();
        }
    }
}
