// rhea peer for ackspec's interop tests: one command per run, a JSON line on stdout with the result.
//   node peer.js send URL ADDRESS N      -> N unsettled durable messages, waits for each outcome
//   node peer.js receive URL ADDRESS N   -> receives N messages with credit, accepts each
//   node peer.js release URL ADDRESS     -> receives one message and settles it as released
// Exit 0 on success, 1 with {"error": ...} otherwise; a 10 s deadline ends a stuck run.
'use strict';
const rhea = require('rhea');

const [cmd, url, address, nArg] = process.argv.slice(2);
const n = Number(nArg || 1);
const u = new URL(url);
const container = rhea.create_container({ id: 'ackspec-rhea-' + process.pid });
const out = { command: cmd, outcomes: [], received: [] };

function finish(code, error) {
  if (error) out.error = String(error);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(code);
}
setTimeout(() => finish(1, 'deadline: no answer within 10 s'), 10000);
container.on('error', (ctx) => finish(1, ctx.error || 'error'));
container.on('disconnected', (ctx) => { if (ctx.error) finish(1, ctx.error); });

// exit only once the broker answered our close: every disposition before it has been written
let exitCode = 0;
let closing = false;
function closeThen(code) { exitCode = code; closing = true; conn.close(); }
container.on('connection_close', () => { if (closing) finish(exitCode); });

const conn = container.connect({ host: u.hostname, port: Number(u.port), reconnect: false,
  username: u.username || undefined, password: u.password || undefined });

if (cmd === 'send') {
  const sender = conn.open_sender({ target: { address } });
  let sent = 0;
  let settled = 0;
  const record = (ctx, outcome) => {
    out.outcomes.push(outcome);
    settled += 1;
    if (settled === n) { closeThen(out.outcomes.every((o) => o === 'accepted') ? 0 : 1); }
  };
  sender.on('sendable', (ctx) => {
    while (sent < n && ctx.sender.sendable()) {
      ctx.sender.send({ durable: true, body: rhea.message.data_section(Buffer.from('rhea-' + sent)),
        application_properties: { 'ackspec-seq': sent, 'ackspec-producer': 'rhea' } });
      sent += 1;
    }
  });
  sender.on('accepted', (ctx) => record(ctx, 'accepted'));
  sender.on('rejected', (ctx) => record(ctx, 'rejected'));
  sender.on('released', (ctx) => record(ctx, 'released'));
  sender.on('modified', (ctx) => record(ctx, 'modified'));
} else if (cmd === 'receive' || cmd === 'release') {
  const want = cmd === 'release' ? 1 : n;
  const receiver = conn.open_receiver({ source: { address }, autoaccept: false, credit_window: 0 });
  receiver.add_credit(want);
  receiver.on('message', (ctx) => {
    const m = ctx.message;
    let body = m.body;
    if (body && body.typecode !== undefined) body = body.content;
    out.received.push({ body: Buffer.isBuffer(body) ? body.toString('latin1') : String(body),
      properties: m.application_properties || {}, durable: !!m.durable,
      delivery_count: m.delivery_count || 0, first_acquirer: !!m.first_acquirer });
    if (cmd === 'release') ctx.delivery.release({ delivery_failed: false }); else ctx.delivery.accept();
    if (out.received.length === want) closeThen(0);
  });
} else {
  finish(2, 'usage: peer.js send|receive|release URL ADDRESS [N]');
}
