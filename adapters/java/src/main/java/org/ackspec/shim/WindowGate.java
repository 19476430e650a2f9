package org.ackspec.shim;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.activemq.artemis.core.protocol.core.Channel;
import org.apache.activemq.artemis.core.protocol.core.CoreRemotingConnection;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.PacketsConfirmedMessage;

/**
 * Holds the confirmations a core channel with a confirmation window receives, one send at a time.
 *
 * <p>With {@code confirmationWindowSize > 0} the broker confirms a channel's packets cumulatively: a
 * {@code PacketsConfirmedMessage} carries the command id of the last packet it received, and the
 * client's {@code ChannelImpl.clearUpTo} then completes every packet up to it in order (the
 * SendAcknowledgementHandler, the CompletionListener). The incoming interceptor drops each such message
 * and this class hands the client a synthetic {@code PacketsConfirmedMessage(k)} of its own, where k is
 * the last command before the first confirmed send a test holds: a confirmation is split per send, held
 * sends stay unconfirmed until released, and as the confirmation is cumulative, a send is confirmed
 * only once every send before it on its channel is. The outgoing interceptor notes the packets in the
 * order the channel numbers them (a session's packets are written by one thread at a time).
 */
final class WindowGate {
    /** A packet the channel keeps for resending until confirmed, with the request a test may hold. */
    private record Sent(Packet packet, RequestLog.Request request, Object connection) {}

    /** One channel's confirmable packets not yet confirmed to the client, from command id {@code base}. */
    private static final class ChannelState {
        final Deque<Sent> pending = new ArrayDeque<>();
        int base;
        int received = -1;
        int examined = -1;
        Channel channel;
    }

    private final List<Sent> unassigned = new ArrayList<>();
    private final Map<String, ChannelState> channels = new HashMap<>();
    private final Map<Packet, Boolean> held = new IdentityHashMap<>();
    private final Function<RequestLog.Request, Boolean> holds;
    private final java.util.function.Consumer<RequestLog.Request> onHeld;

    WindowGate(Function<RequestLog.Request, Boolean> holds, java.util.function.Consumer<RequestLog.Request> onHeld) {
        this.holds = holds;
        this.onHeld = onHeld;
    }

    /** Notes a packet the channel will keep for resending (its channel id is set after the interceptors). */
    synchronized void written(Packet packet, RequestLog.Request request, Object connection) {
        if (packet.isRequiresConfirmations()) {
            unassigned.add(new Sent(packet, request, connection));
        }
    }

    /** Takes over a broker confirmation; returns false so the client does not apply it itself. */
    synchronized boolean confirmed(PacketsConfirmedMessage message, CoreRemotingConnection connection) {
        long id = message.getChannelID();
        ChannelState state = channels.computeIfAbsent(connection.getID() + ":" + id, k -> new ChannelState());
        if (state.channel == null) {
            state.channel = connection.getChannel(id, -1);
        }
        assign(id, connection.getID(), state);
        state.received = Math.max(state.received, message.getCommandID());
        holdNewlyConfirmed(state);
        advance(state);
        return false;
    }

    private void assign(long id, Object connection, ChannelState state) {
        unassigned.removeIf(sent -> {
            if (sent.packet().getChannelID() == id && sent.connection().equals(connection)) {
                state.pending.add(sent);
                return true;
            }
            return false;
        });
    }

    private void holdNewlyConfirmed(ChannelState state) {
        int command = state.base;
        for (Sent sent : state.pending) {
            if (command > state.received) {
                break;
            }
            if (command > state.examined && sent.request() != null && holds.apply(sent.request())) {
                held.put(sent.packet(), Boolean.TRUE);
                onHeld.accept(sent.request());
            }
            command++;
        }
        state.examined = Math.max(state.examined, state.received);
    }

    /** Confirms to the client the longest run of received packets that holds no held send. */
    private void advance(ChannelState state) {
        int last = state.base - 1;
        while (last < state.received && !state.pending.isEmpty() && !held.containsKey(state.pending.peek().packet())) {
            state.pending.poll();
            last++;
        }
        if (state.pending.isEmpty() && held.isEmpty()) {
            last = state.received;  // packets this gate did not see (none expected): the client's own count rules
        }
        if (last >= state.base) {
            state.base = last + 1;
            PacketsConfirmedMessage confirmation = new PacketsConfirmedMessage(last);
            confirmation.setChannelID(state.channel.getID());
            state.channel.handlePacket(confirmation);
        }
    }

    /** Releases the held send of this request (or every held send): confirmed once all before it are. */
    synchronized void release(Integer requestIndex) {
        held.keySet().removeIf(packet -> requestIndex == null || matches(packet, requestIndex));
        channels.values().forEach(this::advance);
    }

    private boolean matches(Packet packet, int requestIndex) {
        for (ChannelState state : channels.values()) {
            for (Sent sent : state.pending) {
                if (sent.packet() == packet) {
                    return sent.request() != null && sent.request().index() == requestIndex;
                }
            }
        }
        return false;
    }
}
