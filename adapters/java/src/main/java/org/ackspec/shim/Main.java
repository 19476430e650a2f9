package org.ackspec.shim;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code java -jar ackspec-jms-shim.jar artemis|activemq|qpid}: serves the JSON-lines shim protocol
 * (docs/shim-protocol.md) on stdin/stdout for one connection of that JMS library.
 *
 * <p>Every request runs on its own thread, because verbs block (a synchronous send waits for a
 * confirmation the test holds back) while the test goes on issuing others. stdout carries protocol
 * lines only: {@code System.out} is pointed at stderr so no library logging can corrupt it.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        PrintStream protocolOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Provider provider = provider(args.length > 0 ? args[0] : "");
        if (provider == null) {
            System.err.println("usage: java -jar ackspec-jms-shim.jar artemis|activemq|qpid");
            System.exit(2);
        }
        Wire wire = new Wire(protocolOut);
        Driver driver = new Driver(provider, new Events(wire));
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("hello", "ackspec-shim");
        hello.put("version", 1);
        hello.put("name", provider.name());
        hello.put("library", provider.library());
        hello.put("library_version", provider.libraryVersion());
        hello.put("protocol", provider.protocol());
        hello.put("features", provider.features());
        // holds broker answers inside the client (CoreGate, OpenWireGate)
        hello.put("gate", provider instanceof ArtemisProvider || provider instanceof ActiveMQProvider);
        wire.write(hello);
        serve(wire, new Dispatcher(driver));
        Runtime.getRuntime().halt(0);  // library threads (reconnect timers, event loops) must not keep us alive
    }

    static Provider provider(String name) {
        return switch (name) {
            case "artemis" -> new ArtemisProvider();
            case "activemq" -> new ActiveMQProvider();
            case "qpid" -> new QpidProvider();
            default -> null;
        };
    }

    /** How long shutdown (or EOF) waits for requests still running to answer before the shim exits. */
    private static final long DRAIN_MILLIS = 5_000;

    private static void serve(Wire wire, Dispatcher dispatcher) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Thread> workers = new ArrayList<>();
        try {
            read(in, wire, dispatcher, workers);
        } finally {
            drain(workers);
        }
    }

    private static void drain(List<Thread> workers) throws InterruptedException {
        long deadline = System.currentTimeMillis() + DRAIN_MILLIS;
        for (Thread worker : workers) {
            worker.join(Math.max(1, deadline - System.currentTimeMillis()));
        }
    }

    private static void read(BufferedReader in, Wire wire, Dispatcher dispatcher, List<Thread> workers)
            throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode request;
            try {
                request = wire.json().readTree(line);
            } catch (JsonProcessingException e) {
                wire.error(null, "BadRequest", e.getOriginalMessage());
                continue;
            }
            Object id = wire.json().treeToValue(request.get("id"), Object.class);
            String op = request.path("op").asText("");
            if ("shutdown".equals(op)) {
                drain(workers);
                wire.reply(id, null);
                return;
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> opArgs = request.hasNonNull("args")
                    ? wire.json().treeToValue(request.get("args"), Map.class) : Map.of();
            Thread worker = new Thread(() -> dispatcher.handle(wire, id, op, opArgs), "ackspec-" + op + "-" + id);
            worker.setDaemon(true);
            worker.start();
            workers.removeIf(t -> !t.isAlive());
            workers.add(worker);
        }
    }
}
