package org.ackspec.shim;

import java.util.Map;

/**
 * What a completion callback or a message listener does to its own objects when a test asks it to (close its
 * producer, session, context or connection; commit or roll back): each caller names the calls its objects
 * offer, and the outcome is reported the same way for all, so the rules on a callback's own objects (JMS 7.3.4,
 * 6.1.8, 6.2.15, 8.8) read the same events whichever object the callback belongs to.
 */
final class Actions {
    /** One call on the callback's own objects. */
    @FunctionalInterface
    interface Call {
        void run() throws Exception;
    }

    private Actions() {}

    /** Runs the call named {@code action}: "ok", or the kind of the exception it threw (an unknown name included). */
    static String perform(String action, Map<String, Call> calls) {
        try {
            Call call = calls.get(action);
            if (call == null) {
                throw ShimError.badRequest("unknown callback action " + action + " (known: " + calls.keySet() + ")");
            }
            call.run();
            return "ok";
        } catch (Exception e) {
            return Errors.kind(e);
        }
    }
}
