package org.ackspec.shim;

import jakarta.jms.ConnectionFactory;
import java.util.ArrayList;
import java.util.List;
import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * Apache Qpid JMS (AMQP 1.0). A persistent send waits for the broker's disposition and a
 * non-persistent one does not, unless {@code jms.forceSyncSend} / {@code jms.forceAsyncSend} say
 * otherwise: that is how the blockOn flags map. Qpid JMS acknowledges with settled dispositions the
 * broker never answers, so there is no blocking acknowledge to map block_on_acknowledge onto.
 *
 * <p>{@code jms.requestTimeout} bounds the library's own synchronous requests (attaching a link, the
 * transaction coordinator, commit and rollback; not sends): a broker that never answers one (RabbitMQ
 * 3.10 never attaches a transaction coordinator) gives Qpid's own {@code JmsOperationTimedOutException}
 * instead of a shim that stops answering. Its default is to wait for ever.
 */
final class QpidProvider implements Provider {
    /**
     * Qpid's bound on a synchronous request: the client suite's receive timeout (5 s). A test that holds an answer
     * releases it as soon as it has seen it held, within milliseconds; a request nobody answers (RabbitMQ's
     * missing coordinator) costs this much per test, so it is no longer than the suite's own wait.
     */
    static final int REQUEST_TIMEOUT_MS = 5_000;

    @Override
    public String name() {
        return "qpid-jms " + libraryVersion();
    }

    @Override
    public String library() {
        return "org.apache.qpid:qpid-jms-client";
    }

    @Override
    public String protocol() {
        return "amqp";
    }

    @Override
    public List<String> features() {
        return List.of("sync-send-confirmed", "async-send", "send-flags", "transactions", "callback-actions",
                "message-access", "ack-modes", "listener", "recover", "selector", "prefetch", "close-consumer", "context");
    }

    @Override
    public ConnectionFactory factory(String host, int port, Options options) throws ShimError {
        List<String> params = new ArrayList<>();
        params.add("jms.requestTimeout=" + REQUEST_TIMEOUT_MS);
        Boolean durable = options.flag("block_on_durable_send");
        Boolean nonDurable = options.flag("block_on_non_durable_send");
        if (Boolean.FALSE.equals(durable) && Boolean.TRUE.equals(nonDurable)) {
            throw ShimError.notApplicable("qpid-jms cannot block non-durable sends only");
        }
        if (Boolean.FALSE.equals(durable)) {
            params.add("jms.forceAsyncSend=true");
        }
        if (Boolean.TRUE.equals(nonDurable)) {
            params.add("jms.forceSyncSend=true");
        }
        Long prefetch = options.integer("prefetch");
        if (prefetch != null) {
            params.add("jms.prefetchPolicy.all=" + prefetch);
        }
        Long redeliveries = options.integer("maximum_redeliveries");
        if (redeliveries != null) {
            params.add("jms.redeliveryPolicy.maxRedeliveries=" + redeliveries);
        }
        if (Boolean.TRUE.equals(options.flag("block_on_acknowledge"))) {
            throw ShimError.notApplicable("qpid-jms settles acknowledgements without a broker answer: no blocking "
                    + "acknowledge (block_on_acknowledge)");
        }
        options.refuseUnused("qpid-jms");
        return new JmsConnectionFactory("amqp://" + host + ":" + port + Provider.query(params));
    }

    @Override
    public int individualAcknowledge() {
        return 101;
    }
}
