// Produce n records and consume them back in a group through bootstrap,
// with kafkajs (pure JavaScript); print one JSON object: the brokers the
// client's metadata names, what was acknowledged and what was consumed.
// Run by e2e/clients_test.go with NODE_PATH at the installed kafkajs.
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, group, nArg] = process.argv.slice(2);
const n = parseInt(nArg, 10);

async function main() {
  const kafka = new Kafka({ clientId: 'e2e-kafkajs', brokers: [bootstrap], logLevel: logLevel.ERROR });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = [];
  for (let i = 0; i < n; i += 50) {
    const messages = [];
    for (let j = i; j < Math.min(n, i + 50); j++) messages.push({ key: String(j), value: 'js-' + j });
    const res = await producer.send({ topic, acks: -1, messages });
    for (const r of res) acked.push([r.partition, Number(r.baseOffset), r.errorCode]);
  }
  await producer.disconnect();

  const admin = kafka.admin();
  await admin.connect();
  const cluster = await admin.describeCluster();
  const brokers = cluster.brokers.map((b) => b.host + ':' + b.port);
  await admin.disconnect();

  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  let done;
  const all = new Promise((resolve) => { done = resolve; });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      consumed.push([partition, Number(message.offset), message.value.toString()]);
      if (consumed.length >= n) done();
    },
  });
  let timer;
  await Promise.race([all, new Promise((resolve) => { timer = setTimeout(resolve, 60000); })]);
  clearTimeout(timer);
  await consumer.disconnect();
  console.log(JSON.stringify({ version: require('kafkajs/package.json').version, brokers, acked, consumed, errors: [] }));
}

main().catch((e) => {
  console.log(JSON.stringify({ brokers: [], acked: [], consumed: [], errors: [String(e && e.stack || e)] }));
  process.exit(1);
});
