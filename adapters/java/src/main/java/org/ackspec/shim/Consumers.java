package org.ackspec.shim;

import jakarta.jms.BytesMessage;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageListener;
import jakarta.jms.TextMessage;
import java.nio.charset.StandardCharsets;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** Consumers, synchronous receive, acknowledgement and MessageListeners (with the test's listener actions). */
final class Consumers {
    record ConsumerState(String handle, MessageConsumer consumer, Driver.SessionState session) {}

    private static final long BLOCK_LIMIT_SECONDS = 30;

    private final Driver driver;
    private final Handles<ConsumerState> consumers = new Handles<>("c");
    private final Handles<Message> received = new Handles<>("r");
    private volatile String listenerAction;
    private final CountDownLatch released = new CountDownLatch(1);

    Consumers(Driver driver) {
        this.driver = driver;
    }

    Object consumer(Map<String, Object> args) throws Exception {
        Driver.SessionState s = driver.sessions.get(args.get("session"));
        Object prefetch = args.get("prefetch");
        Provider.Destinations where = Provider.Destinations.of(s.session());
        Destination destination = prefetch == null ? driver.destination(where, args.get("destination"))
                : driver.provider.withPrefetch(where, String.valueOf(args.get("destination")),
                        ((Number) prefetch).longValue());
        Object selector = args.get("selector");
        MessageConsumer consumer = s.session().createConsumer(destination, selector == null ? null : selector.toString());
        ConsumerState state = new ConsumerState(consumers.reserve(), consumer, s);
        consumers.put(state.handle(), state);
        driver.provider.consumerCreated(consumer, state.handle());
        if (Boolean.TRUE.equals(args.get("listener"))) {
            int failFirst = ((Number) args.getOrDefault("fail_first", 0)).intValue();
            consumer.setMessageListener(new Listener(state, failFirst, listenerAction));
        }
        return state.handle();
    }

    Object receive(Map<String, Object> args) throws Exception {
        ConsumerState c = consumers.get(args.get("consumer"));
        double seconds = ((Number) args.getOrDefault("timeout", 5.0)).doubleValue();
        long millis = Math.round(seconds * 1000);
        Message message = millis <= 0 ? c.consumer().receiveNoWait() : c.consumer().receive(millis);
        if (message == null) {
            return null;
        }
        String handle = driver.provider.messageHandle(message, received);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("handle", handle);
        result.put("body", Wire.b64(body(message)));
        result.put("redelivered", message.getJMSRedelivered());
        result.put("delivery_count", deliveryCount(message));
        result.put("properties", properties(message));
        return result;
    }

    Object acknowledge(Map<String, Object> args) throws Exception {
        received.get(args.get("message")).acknowledge();
        return null;
    }

    Object close(Map<String, Object> args) throws Exception {
        consumers.get(args.get("consumer")).consumer().close();
        return null;
    }

    Object setListenerAction(Map<String, Object> args) {
        Object action = args.get("action");
        listenerAction = action == null ? null : action.toString();
        return null;
    }

    Object releaseListeners() {
        released.countDown();
        return null;
    }

    /** Where a listener (MessageListener or CompletionListener) with the {@code block} action waits: until
     * {@code release_listeners}, bounded so that a test that never releases cannot hang the library. */
    void awaitRelease() {
        try {
            released.await(BLOCK_LIMIT_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static byte[] body(Message message) throws JMSException {
        if (message instanceof BytesMessage bytes) {
            bytes.reset();
            byte[] data = new byte[(int) bytes.getBodyLength()];
            bytes.readBytes(data);
            return data;
        }
        if (message instanceof TextMessage text) {
            String value = text.getText();
            return value == null ? new byte[0] : value.getBytes(StandardCharsets.UTF_8);
        }
        byte[] data = message.getBody(byte[].class);
        return data == null ? new byte[0] : data;
    }

    static Object deliveryCount(Message message) throws JMSException {
        return message.propertyExists("JMSXDeliveryCount") ? message.getIntProperty("JMSXDeliveryCount") : null;
    }

    static Map<String, String> properties(Message message) throws JMSException {
        Map<String, String> out = new LinkedHashMap<>();
        Enumeration<?> names = message.getPropertyNames();
        while (names.hasMoreElements()) {
            String name = names.nextElement().toString();
            out.put(name, String.valueOf(message.getObjectProperty(name)));
        }
        return out;
    }

    /** A MessageListener that reports each delivery, may fail on purpose, and performs the test's action. */
    private final class Listener implements MessageListener {
        private final ConsumerState consumer;
        private final String action;
        private int failLeft;

        Listener(ConsumerState consumer, int failFirst, String action) {
            this.consumer = consumer;
            this.failLeft = failFirst;
            this.action = action;
        }

        @Override
        public void onMessage(Message message) {
            Driver.SessionState session = consumer.session();
            int concurrent = session.running().incrementAndGet();
            try {
                String handle = driver.provider.messageHandle(message, received);
                driver.events.emit("message", "consumer", consumer.handle(), "message", handle,
                        "body", Wire.b64(body(message)), "redelivered", message.getJMSRedelivered(),
                        "delivery_count", deliveryCount(message), "concurrent", concurrent, "thread", Events.thread());
                if (action != null) {
                    act(session);
                }
                if (failLeft > 0) {
                    failLeft--;
                    throw new RuntimeException("listener failure requested by the test");
                }
            } catch (JMSException e) {
                throw new RuntimeException(e);
            } finally {
                session.running().decrementAndGet();
                driver.events.emit("listener-returned", "consumer", consumer.handle());
            }
        }

        private void act(Driver.SessionState session) {
            if ("block".equals(action)) {
                driver.events.emit("listener-blocked", "consumer", consumer.handle());
                awaitRelease();
                return;
            }
            String outcome = Actions.perform(action, Map.of(
                    "close-consumer", () -> consumer.consumer().close(),
                    "close-session", () -> session.session().close(),
                    "close-connection", () -> driver.connection().close()));
            driver.events.emit("callback-result", "action", action, "outcome", outcome);
        }
    }
}
