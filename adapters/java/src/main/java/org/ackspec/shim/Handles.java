package org.ackspec.shim;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/** The strings the shim invents for its objects ("s1", "p2", "m7"); the test only passes them back. */
final class Handles<T> {
    private static final AtomicLong NEXT = new AtomicLong(1);
    private final String prefix;
    private final Map<String, T> objects = new ConcurrentHashMap<>();

    Handles(String prefix) {
        this.prefix = prefix;
    }

    String reserve() {
        return prefix + NEXT.getAndIncrement();
    }

    String add(T object) {
        String handle = reserve();
        objects.put(handle, object);
        return handle;
    }

    void put(String handle, T object) {
        objects.put(handle, object);
    }

    T get(Object handle) throws ShimError {
        T object = handle == null ? null : objects.get(handle.toString());
        if (object == null) {
            throw ShimError.badRequest("no " + prefix + " handle " + handle);
        }
        return object;
    }

    /** True when {@code handle} names one of these objects (handles of every kind are unique). */
    boolean has(Object handle) {
        return handle != null && objects.containsKey(handle.toString());
    }

    Iterable<T> all() {
        return objects.values();
    }
}
