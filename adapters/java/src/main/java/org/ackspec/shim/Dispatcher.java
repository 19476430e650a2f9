package org.ackspec.shim;

import java.util.Map;

/** Routes one request to the driver and answers it with a reply or a mapped error. */
final class Dispatcher {
    private final Driver driver;

    Dispatcher(Driver driver) {
        this.driver = driver;
    }

    void handle(Wire wire, Object id, String op, Map<String, Object> args) {
        try {
            wire.reply(id, dispatch(op, args));
        } catch (Throwable e) {
            wire.error(id, Errors.kind(e), Errors.describe(e));
        }
    }

    private Object dispatch(String op, Map<String, Object> args) throws Exception {
        Consumers consumers = driver.consumers;
        Contexts contexts = driver.contexts;
        boolean ofContext = contexts.isContext(args.get("session")) || contexts.isProducer(args.get("producer"));
        return switch (op) {
            case "open" -> driver.open(args);
            case "session" -> driver.session(args);
            case "context" -> contexts.context(args);
            case "producer" -> ofContext ? contexts.producer(args) : driver.producer(args);
            case "sync_send" -> ofContext ? contexts.send(args, false) : driver.send(args, false);
            case "async_send" -> ofContext ? contexts.send(args, true) : driver.send(args, true);
            case "touch_message" -> driver.touchMessage(args);
            case "message_id" -> driver.messageId(args);
            case "set_send_ack_handler" -> driver.setSendAckHandler();
            case "set_publish_event_listener" ->
                throw ShimError.notApplicable(driver.provider.name() + " has no publish window");
            case "consumer" -> consumers.consumer(args);
            case "receive" -> consumers.receive(args);
            case "acknowledge" -> consumers.acknowledge(args);
            case "close_consumer" -> consumers.close(args);
            case "set_listener_action" -> consumers.setListenerAction(args);
            case "release_listeners" -> consumers.releaseListeners();
            case "commit", "rollback" -> ofContext ? contexts.call(args, op) : driver.sessionCall(args, op);
            case "recover", "close_session" -> driver.sessionCall(args, op);
            case "close_context" -> contexts.close(args);
            case "close_producer" -> driver.closeProducer(args);
            case "gate_hold" -> driver.provider.gate().open(args);
            case "gate_release" -> driver.provider.gate().release(args);
            case "gate_reject" -> driver.provider.gate().reject(args);
            case "gate_first_seen" -> driver.provider.gate().firstSeen(args);
            case "gate_released_at" -> driver.provider.gate().releasedAt(args);
            case "gate_clear" -> driver.provider.gate().clear();
            case "gate_seen" -> driver.provider.gate().seen(args);
            case "close" -> driver.close();
            case "crash" -> driver.crash();
            default -> throw new ShimError("UnknownOperation", "unknown op " + op);
        };
    }
}
