package org.ackspec.shim;

import jakarta.jms.IllegalStateException;
import jakarta.jms.IllegalStateRuntimeException;
import jakarta.jms.JMSException;
import jakarta.jms.JMSRuntimeException;
import jakarta.jms.MessageNotReadableException;
import jakarta.jms.MessageNotWriteableException;
import jakarta.jms.TransactionInProgressException;
import jakarta.jms.TransactionRolledBackException;
import java.io.IOException;

/**
 * Maps what a JMS library threw onto the protocol's error kinds, which the tests compare.
 *
 * <p>Only the Jakarta exception types count as {@code IllegalStateError}: a library that throws
 * {@code java.lang.IllegalStateException} where the specification asks for the JMS one is reported
 * as the class it threw, so the deviation stays visible.
 */
final class Errors {
    private Errors() {}

    static String kind(Throwable error) {
        if (error instanceof ShimError shim) {
            return shim.kind;
        }
        if (error instanceof IllegalStateException || error instanceof IllegalStateRuntimeException) {
            return "IllegalStateError";
        }
        if (error instanceof MessageNotReadableException || error instanceof MessageNotWriteableException) {
            return "MessageNotAccessibleError";
        }
        if (error instanceof TransactionRolledBackException) {
            return "TransactionRolledBackError";
        }
        if (error instanceof TransactionInProgressException) {
            return "TransactionInProgressError";
        }
        if (error instanceof JMSException || error instanceof JMSRuntimeException) {
            return connectionLost(error) ? "ConnectionLostError" : "JMSError";
        }
        return error.getClass().getSimpleName();
    }

    /** True when the cause chain shows the connection went away (an I/O failure, a closed transport). */
    static boolean connectionLost(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            String name = t.getClass().getSimpleName();
            if (t instanceof IOException || name.contains("ConnectionFailed") || name.contains("TransportDisposed")
                    || name.contains("NotConnected") || name.contains("ConnectionRemoteClosed")) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }

    static String describe(Throwable error) {
        if (error instanceof ShimError) {
            return error.getMessage();
        }
        String message = error.getMessage();
        return error.getClass().getName() + (message == null ? "" : ": " + message);
    }
}
