// A librdkafka producer (node-rdkafka, librdkafka 2.12) that pushes its
// KIP-714 metrics: run by e2e/telemetry_test.go through the gateway.
//
//   NODE_RDKAFKA_DIR=<build> node produce.js BOOTSTRAP CLIENT_ID TOPIC
//
// It produces 8 KiB records as fast as its 1 MiB buffer lets it until its
// stdin closes (the test has seen what it waits for) or MAX_MS passes, then
// flushes and disconnects, which sends a terminating push. It prints one
// line per telemetry event librdkafka logs and a summary every second.
'use strict';

const path = require('path');
const Kafka = require(path.join(process.env.NODE_RDKAFKA_DIR, 'node_modules', 'node-rdkafka'));

const [bootstrap, clientId, topic] = process.argv.slice(2);
if (!bootstrap || !clientId || !topic) {
  console.error('usage: node produce.js BOOTSTRAP CLIENT_ID TOPIC');
  process.exit(2);
}
const maxMs = Number(process.env.MAX_MS || 90000);

const producer = new Kafka.Producer({
  'bootstrap.servers': bootstrap,
  'client.id': clientId,
  'enable.metrics.push': true, // librdkafka's default, said out loud
  debug: 'telemetry',
  'linger.ms': 5,
  'batch.size': 16384,
  'queue.buffering.max.kbytes': 1024,
  dr_cb: true,
});

let sent = 0;
let acked = 0;
let failed = 0;
let stopping = false;

producer.on('event.log', (e) => {
  console.log('log', e.fac, e.message.replace(/\s+/g, ' '));
});
producer.on('event.error', (e) => console.log('error', String(e)));
producer.on('delivery-report', (err) => {
  if (err) failed++;
  else acked++;
});

function stop(why) {
  if (stopping) return;
  stopping = true;
  console.log('stopping', why, 'sent', sent, 'acked', acked, 'failed', failed);
  producer.flush(5000, () => producer.disconnect());
}

producer.on('ready', () => {
  console.log('ready', 'librdkafka', Kafka.librdkafkaVersion);
  producer.setPollInterval(50);
  const value = Buffer.alloc(8192, 'x');
  const fill = setInterval(() => {
    if (stopping) {
      clearInterval(fill);
      return;
    }
    for (let i = 0; i < 8; i++) {
      try {
        producer.produce(topic, null, value);
        sent++;
      } catch (_) {
        break; // the buffer is full: the quota holds it back
      }
    }
  }, 20);
  const report = setInterval(() => {
    if (stopping) clearInterval(report);
    else console.log('progress', 'sent', sent, 'acked', acked, 'failed', failed);
  }, 1000);
});

producer.on('disconnected', () => {
  console.log('disconnected');
  process.exit(0);
});

process.stdin.on('end', () => stop('stdin closed'));
process.stdin.resume();
setTimeout(() => stop('MAX_MS'), maxMs);
// Whatever happens, never outlive the bound by much.
setTimeout(() => process.exit(3), maxMs + 15000).unref();

producer.connect({ timeout: 10000 }, (err) => {
  if (err) {
    console.error('connect:', String(err));
    process.exit(1);
  }
});
