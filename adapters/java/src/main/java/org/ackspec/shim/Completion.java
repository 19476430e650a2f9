package org.ackspec.shim;

import jakarta.jms.CompletionListener;
import jakarta.jms.Message;

/**
 * The CompletionListener of one asynchronous send. It reports from inside the library's callback,
 * before returning, with the callback's thread, the sending thread and how many callbacks of the
 * session are running at that moment; then performs the requested action on its own objects, or with
 * {@code block} stays running until {@code release_listeners} (so a test can close while it runs).
 */
final class Completion implements CompletionListener {
    private final Driver driver;
    private final String send;
    private final Driver.ProducerState producer;
    private final String action;
    private final long senderThread = Events.thread();  // built on the sending thread

    Completion(Driver driver, String send, Driver.ProducerState producer, String action) {
        this.driver = driver;
        this.send = send;
        this.producer = producer;
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
        Driver.SessionState session = producer.session();
        int concurrent = session.running().incrementAndGet();
        try {
            if (exception == null) {
                driver.events.emit(kind, "send", send, "thread", Events.thread(), "sender_thread", senderThread,
                        "session", session.handle(), "concurrent", concurrent);
            } else {
                driver.events.emit(kind, "send", send, "thread", Events.thread(), "sender_thread", senderThread,
                        "session", session.handle(), "concurrent", concurrent, "error", Errors.describe(exception));
            }
            if ("block".equals(action)) {
                driver.events.emit("callback-blocked", "send", send);
                driver.consumers.awaitRelease();
            } else if (action != null) {
                driver.events.emit("callback-result", "action", action, "outcome",
                        driver.act(action, producer, session));
            }
        } finally {
            session.running().decrementAndGet();
        }
    }
}
