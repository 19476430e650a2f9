// Non-Python STOMP client (npm "stompit") driving the reference broker.
// Usage: node stompit_client.js PORT QUEUE N  -> prints one JSON line with what it observed.
'use strict';
const stompit = require('stompit');

const [port, queue, n] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4] || 10)];
const result = { sent: 0, receipts: 0, received: [], redelivered: null, errors: [] };
const timer = setTimeout(() => { result.errors.push('timeout'); done(); }, 15000);
let client;

function done() {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(result) + '\n');
  if (client) { client.disconnect(() => process.exit(0)); setTimeout(() => process.exit(0), 1000); }
  else process.exit(0);
}

stompit.connect({ host: '127.0.0.1', port, connectHeaders: { host: '/', 'accept-version': '1.2', 'heart-beat': '0,0' } },
  (err, c) => {
    if (err) { result.errors.push(String(err.message)); return done(); }
    client = c;
    c.on('error', (e) => { result.errors.push(String(e.message)); });
    let nacked = false;
    c.subscribe({ destination: queue, ack: 'client-individual', id: 'sub-1' }, (err2, message) => {
      if (err2) { result.errors.push(String(err2.message)); return done(); }
      message.readString('utf-8', (err3, body) => {
        const h = message.headers;
        if (body === 'm0' && !nacked) {
          nacked = true;
          c.nack(message);
          return;
        }
        if (body === 'm0') result.redelivered = { redelivered: h.redelivered, count: h['delivery-count'] };
        result.received.push(body);
        c.ack(message);
        if (result.received.length === n) done();
      });
    });
    for (let i = 0; i < n; i++) {
      const frame = c.send({ destination: queue, persistent: 'true', 'content-type': 'text/plain' },
        { onReceipt: () => { result.receipts += 1; } });
      frame.write('m' + i);
      frame.end();
      result.sent += 1;
    }
  });
