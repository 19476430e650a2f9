// Browser-side STOMP client (npm "@stomp/stompjs") over WebSocket (npm "ws" stands in for the browser's
// WebSocket in Node) driving the reference broker's `--ws` listener.
// Usage: node stompjs_client.js WS_URL QUEUE N  -> prints one JSON line with what it observed.
'use strict';
const { Client } = require('@stomp/stompjs');
const WebSocket = require('ws');

const [url, queue, n] = [process.argv[2], process.argv[3], Number(process.argv[4] || 10)];
const result = { subprotocol: null, sent: 0, receipts: 0, received: [], redelivered: null, errors: [] };
const timer = setTimeout(() => { result.errors.push('timeout'); done(); }, 15000);

function done() {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(result) + '\n');
  client.deactivate().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000);
}

const client = new Client({
  webSocketFactory: () => {
    const ws = new WebSocket(url, ['v12.stomp', 'v11.stomp', 'v10.stomp']);
    ws.on('open', () => { result.subprotocol = ws.protocol; });
    return ws;
  },
  connectHeaders: { host: '/' },
  heartbeatIncoming: 0,
  heartbeatOutgoing: 0,
  reconnectDelay: 0,
  onStompError: (frame) => { result.errors.push(frame.headers.message || 'ERROR'); done(); },
  onWebSocketError: () => { result.errors.push('websocket error'); done(); },
});

client.onConnect = () => {
  let nacked = false;
  const seen = new Set();
  client.subscribe(queue, (message) => {
    const h = message.headers;
    if (message.body === 'm0' && !nacked) {
      nacked = true;
      message.nack();
      return;
    }
    if (message.body === 'm0') result.redelivered = { redelivered: h.redelivered || null, count: h['delivery-count'] || null };
    message.ack();
    seen.add(message.body);
    result.received.push(message.body);
    if (seen.size === n) done();
  }, { ack: 'client-individual', id: 'sub-1' });
  for (let i = 0; i < n; i++) {
    const receipt = `r${i}`;
    client.watchForReceipt(receipt, () => { result.receipts += 1; });
    client.publish({ destination: queue, body: `m${i}`, headers: { receipt } });
    result.sent += 1;
  }
};
client.activate();
