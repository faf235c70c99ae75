// ProduceConsume is the Java client's end-to-end run through Tollgate
// (e2e/java_test.go runs it with Java's single-file source launch and the
// Kafka release's jars on the classpath):
//
//	java -cp "<jars>/*" ProduceConsume.java <bootstrap> <topic> <group> <partitions> <per-partition> <group.protocol>
//
// It produces per-partition records to each partition with a KafkaProducer
// (acks=all, idempotence on), checking each one's acknowledged partition
// and offset, then reads them back with a KafkaConsumer in the consumer
// group (the group protocol "classic" or "consumer"), commits, and prints
// one line per record consumed, in the order consumed:
//
//	RECORD <partition> <offset> <key> <value>
//
// then "COMMITTED <partition> <offset>" for each partition and "DONE". Any
// failure prints "ERROR ..." and exits 1; the Go test checks the lines.
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ProduceConsume {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.out.println("ERROR usage: ProduceConsume <bootstrap> <topic> <group> <partitions> <per-partition> <group.protocol>");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[5];
        int partitions = Integer.parseInt(args[3]), perPartition = Integer.parseInt(args[4]);
        try {
            produce(bootstrap, topic, partitions, perPartition);
            consume(bootstrap, topic, group, protocol, partitions, perPartition);
            System.out.println("DONE");
            System.out.flush();
        } catch (Exception e) {
            System.out.println("ERROR " + e);
            e.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
    }

    static void produce(String bootstrap, String topic, int partitions, int perPartition) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "tollgate-e2e-java-producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<int[]> want = new ArrayList<>();
            for (int i = 0; i < perPartition; i++) {
                for (int part = 0; part < partitions; part++) {
                    sent.add(prod.send(new ProducerRecord<>(topic, part, "k" + part, part + "-" + i)));
                    want.add(new int[] {part, i});
                }
            }
            prod.flush();
            for (int j = 0; j < sent.size(); j++) {
                RecordMetadata md = sent.get(j).get();
                int[] w = want.get(j);
                if (md.partition() != w[0] || md.offset() != w[1]) {
                    throw new IllegalStateException("record " + w[0] + "-" + w[1] + " acknowledged at "
                        + md.partition() + "@" + md.offset() + ", want " + w[0] + "@" + w[1]);
                }
            }
        }
    }

    static void consume(String bootstrap, String topic, String group, String protocol, int partitions, int perPartition) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "tollgate-e2e-java-consumer");
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int want = partitions * perPartition, got = 0;
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(c)) {
            cons.subscribe(List.of(topic));
            while (got < want) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("consumed " + got + " of " + want + " records within 60 s");
                }
                for (ConsumerRecord<String, String> r : cons.poll(Duration.ofMillis(500))) {
                    out.append("RECORD ").append(r.partition()).append(' ').append(r.offset()).append(' ')
                        .append(r.key()).append(' ').append(r.value()).append('\n');
                    got++;
                }
            }
            cons.commitSync(Duration.ofSeconds(30));
            Set<TopicPartition> tps = new HashSet<>();
            for (int part = 0; part < partitions; part++) {
                tps.add(new TopicPartition(topic, part));
            }
            Map<TopicPartition, OffsetAndMetadata> committed = cons.committed(tps, Duration.ofSeconds(30));
            for (int part = 0; part < partitions; part++) {
                OffsetAndMetadata o = committed.get(new TopicPartition(topic, part));
                out.append("COMMITTED ").append(part).append(' ').append(o == null ? -1 : o.offset()).append('\n');
            }
        }
        System.out.print(out);
    }
}
