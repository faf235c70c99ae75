"""A librdkafka producer (confluent-kafka from PyPI, the librdkafka its
wheel bundles) that pushes its KIP-714 metrics: run by
e2e/telemetry_test.go through the gateway.

    python produce.py BOOTSTRAP CLIENT_ID TOPIC

It produces 8 KiB records as fast as its 1 MiB buffer lets it until its
stdin closes (the test has seen what it waits for) or MAX_MS passes, then
flushes, which leaves the producer to send its terminating push as it is
closed. It prints one line per telemetry event librdkafka logs and a
summary every second."""
import logging
import os
import select
import sys
import time

from confluent_kafka import KafkaException, Producer, libversion

bootstrap, client_id, topic = sys.argv[1], sys.argv[2], sys.argv[3]
max_ms = int(os.environ.get("MAX_MS", "90000"))


class Lines(logging.Handler):
    def emit(self, record):
        print("log", record.getMessage().replace("\n", " "), flush=True)


log = logging.getLogger("librdkafka")
log.setLevel(logging.DEBUG)
log.addHandler(Lines())

counts = {"sent": 0, "acked": 0, "failed": 0}


def delivered(err, _msg):
    counts["failed" if err is not None else "acked"] += 1


p = Producer({
    "bootstrap.servers": bootstrap,
    "client.id": client_id,
    "enable.metrics.push": True,  # librdkafka's default, said out loud
    "debug": "telemetry",
    "linger.ms": 5,
    "batch.size": 16384,
    "queue.buffering.max.kbytes": 1024,
    "logger": log,
})
print("ready", "librdkafka", libversion()[0], flush=True)
value = b"x" * 8192
start = time.monotonic()
last = start
why = "MAX_MS"
while (time.monotonic() - start) * 1000 < max_ms:
    for _ in range(8):
        try:
            p.produce(topic, value, on_delivery=delivered)
            counts["sent"] += 1
        except BufferError:
            break  # the buffer is full: the quota holds it back
        except KafkaException as e:
            print("error", e, flush=True)
            break
    p.poll(0.02)
    if time.monotonic() - last >= 1:
        last = time.monotonic()
        print("progress", "sent", counts["sent"], "acked", counts["acked"], "failed", counts["failed"], flush=True)
    r, _, _ = select.select([sys.stdin], [], [], 0)
    if r and not sys.stdin.read(1):
        why = "stdin closed"
        break
print("stopping", why, "sent", counts["sent"], "acked", counts["acked"], "failed", counts["failed"], flush=True)
p.flush(5)
p.poll(0.5)
print("disconnected", flush=True)
