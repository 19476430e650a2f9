package org.ackspec.shim;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The {@code open} options (docs/shim-protocol.md section 3), read by a provider.
 *
 * <p>A provider takes the options its library has; {@link #refuseUnused} then turns any option left
 * with a value that asks for something (not null, not false) into {@code NotApplicable}, so a test of
 * a setting the library lacks is skipped naming it, never run against a client that ignored it.
 */
final class Options {
    private final Map<String, Object> values;
    private final Set<String> used = new HashSet<>();

    Options(Map<String, Object> values) {
        this.values = new TreeMap<>(values == null ? Map.of() : values);
    }

    boolean has(String key) {
        return values.get(key) != null;
    }

    Boolean flag(String key) throws ShimError {
        used.add(key);
        Object value = values.get(key);
        if (value == null || value instanceof Boolean) {
            return (Boolean) value;
        }
        throw ShimError.badRequest(key + " must be true or false, not " + value);
    }

    Long integer(String key) throws ShimError {
        used.add(key);
        Object value = values.get(key);
        if (value == null) {
            return null;
        }
        if (value instanceof Number n && n.doubleValue() == Math.rint(n.doubleValue())) {
            return n.longValue();
        }
        throw ShimError.badRequest(key + " must be an integer, not " + value);
    }

    Double number(String key) throws ShimError {
        used.add(key);
        Object value = values.get(key);
        if (value == null) {
            return null;
        }
        if (value instanceof Number n) {
            return n.doubleValue();
        }
        throw ShimError.badRequest(key + " must be a number, not " + value);
    }

    void refuseUnused(String library) throws ShimError {
        for (Map.Entry<String, Object> entry : values.entrySet()) {
            Object value = entry.getValue();
            if (!used.contains(entry.getKey()) && value != null && !Boolean.FALSE.equals(value)) {
                throw ShimError.notApplicable(library + " has no setting for " + entry.getKey() + "=" + value);
            }
        }
    }
}
