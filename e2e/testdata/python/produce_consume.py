"""Produce n records and consume them back in a group through bootstrap,
with confluent-kafka (librdkafka inside the wheel); print one JSON object:
the brokers the client's metadata names, what was acknowledged and what
was consumed. Run by e2e/clients_test.go."""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, version, libversion

bootstrap, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conf = {"bootstrap.servers": bootstrap, "client.id": "e2e-python"}

p = Producer(dict(conf, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5}))
acked, errors = [], []


def delivered(err, msg):
    if err is not None:
        errors.append(str(err))
    else:
        acked.append([msg.partition(), msg.offset(), msg.value().decode()])


for i in range(n):
    p.produce(topic, key=str(i).encode(), value=("py-%d" % i).encode(), on_delivery=delivered)
    p.poll(0)
left = p.flush(60)
md = p.list_topics(timeout=10)
brokers = ["%s:%d" % (b.host, b.port) for b in md.brokers.values()]

c = Consumer(dict(conf, **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
c.subscribe([topic])
consumed = []
deadline = time.time() + 60
while len(consumed) < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        errors.append(str(m.error()))
        continue
    consumed.append([m.partition(), m.offset(), m.value().decode()])
if consumed:
    c.commit(asynchronous=False)
c.close()
print(json.dumps({"version": version()[0], "librdkafka": libversion()[0], "brokers": brokers,
                  "unflushed": left, "acked": acked, "consumed": consumed, "errors": errors}))
