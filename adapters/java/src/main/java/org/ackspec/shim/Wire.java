package org.ackspec.shim;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintStream;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The shim's side of stdout: replies and events, one JSON object per line, under one lock so lines
 * never interleave. Events are written by the thread on which they happen (inside a completion
 * listener, before it returns), because the tests compare the order of events.
 */
final class Wire {
    private final ObjectMapper json = new ObjectMapper();
    private final PrintStream out;

    Wire(PrintStream out) {
        this.out = out;
    }

    ObjectMapper json() {
        return json;
    }

    void write(Map<String, Object> line) {
        String text;
        try {
            text = json.writeValueAsString(line);
        } catch (Exception e) {
            text = "{\"event\":\"shim-error\",\"detail\":{\"error\":\"unserialisable line\"}}";
        }
        synchronized (out) {
            out.print(text);
            out.print('\n');
            out.flush();
        }
    }

    void reply(Object id, Object result) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.put("ok", true);
        line.put("result", result);
        write(line);
    }

    void error(Object id, String kind, String message) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.put("ok", false);
        line.put("error", Map.of("kind", kind, "message", message == null ? "" : message));
        write(line);
    }

    void event(String kind, Map<String, Object> detail) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", kind);
        line.put("detail", detail);
        write(line);
    }

    static Map<String, Object> b64(byte[] data) {
        return Map.of("b64", Base64.getEncoder().encodeToString(data));
    }
}
