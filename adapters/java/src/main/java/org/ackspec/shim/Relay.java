package org.ackspec.shim;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A loopback TCP relay between the JMS library and the address it was asked to connect to.
 *
 * <p>The {@code crash} verb must drop the connection without any goodbye, and none of the three
 * libraries has a public way to do that. The relay does it from outside the library, the same way
 * for all of them: {@link #crash} resets every socket (SO_LINGER 0) and stops accepting, so a
 * reconnecting library finds nobody there. Bytes are copied untouched.
 */
final class Relay implements AutoCloseable {
    private final ServerSocket server;
    private final String targetHost;
    private final int targetPort;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private volatile boolean crashed;

    Relay(String targetHost, int targetPort) throws IOException {
        this.targetHost = targetHost;
        this.targetPort = targetPort;
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "ackspec-relay-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    int port() {
        return server.getLocalPort();
    }

    private void accept() {
        while (!crashed) {
            try {
                Socket client = server.accept();
                Socket broker = new Socket();
                broker.connect(new InetSocketAddress(targetHost, targetPort), 10_000);
                client.setTcpNoDelay(true);
                broker.setTcpNoDelay(true);
                sockets.add(client);
                sockets.add(broker);
                pump(client, broker, "to-broker");
                pump(broker, client, "to-client");
            } catch (IOException e) {
                if (server.isClosed()) {
                    return;
                }
            }
        }
    }

    private void pump(Socket from, Socket to, String name) {
        Thread t = new Thread(() -> {
            byte[] buffer = new byte[65536];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    out.write(buffer, 0, n);
                    out.flush();
                }
                to.shutdownOutput();
            } catch (IOException e) {
                closeQuietly(to);
            }
        }, "ackspec-relay-" + name);
        t.setDaemon(true);
        t.start();
    }

    /** Drops every connection with a reset and refuses new ones. */
    void crash() {
        crashed = true;
        closeQuietly(server);
        for (Socket socket : sockets) {
            try {
                socket.setSoLinger(true, 0);
            } catch (IOException e) {
                // already closed
            }
            closeQuietly(socket);
        }
    }

    @Override
    public void close() {
        closeQuietly(server);
        for (Socket socket : sockets) {
            closeQuietly(socket);
        }
    }

    private static void closeQuietly(AutoCloseable closeable) {
        try {
            closeable.close();
        } catch (Exception e) {
            // nothing to do: it is gone either way
        }
    }
}
