package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// The Java tools' own figures (issue 21 point 3): kafka-producer-perf-test
// and kafka-consumer-perf-test under a producer and a consumer quota Q on
// one client-id, straight to Kafka with the brokers' quota and through
// Tollgate with Tollgate's: the rates after the start-up burst (their 5 s
// windows) and the Java client's throttle metrics (--print-metrics).

// consumerWindow is ConsumerPerformance's --show-detailed-stats line:
// time, threadId, MB consumed, MB/s, records, records/s, ...
var consumerWindow = regexp.MustCompile(`^\d{4}-\d\d-\d\d [\d:,.]+, -?\d+, ([\d.]+), ([\d.]+), `)

type javaFigures struct {
	produceBps, consumeBps             float64
	produceAvg, produceMax             float64 // ms
	fetchAvg, fetchMax                 float64 // ms
	tollgateThrottled, tollgateSeconds float64 // producer and consumer buckets together
}

func javaTools(c *kafka.Cluster, gw *app.App) {
	fmt.Printf("\nKafka's perf tools, producer_byte_rate = consumer_byte_rate = Q on one client-id, %d partitions:\n", *parts)
	fmt.Printf("%-20s %12s %8s %12s %8s %16s %16s\n", "way", "produce B/s", "÷ Q", "consume B/s", "÷ Q", "produce thr avg/max", "fetch thr avg/max")
	for _, way := range []string{"kafka broker quota", "tollgate quota"} {
		id := fmt.Sprintf("perf-%d", time.Now().UnixNano())
		must(createTopic(c, id))
		bootstrap := strings.Join(c.Bootstrap(kafka.Plaintext), ",")
		expect := 3.0 // Kafka: about Q per broker
		if way == "kafka broker quota" {
			must(setBrokerQuotas(c, id, *q, "producer_byte_rate", "consumer_byte_rate"))
		} else {
			must(setTollgateQuotas(gw, id, *q, "producer_byte_rate", "consumer_byte_rate"))
			bootstrap = gw.Bootstrap()
			expect = 1
		}
		f, err := javaToolsRun(c, bootstrap, id, expect)
		must(err)
		fmt.Printf("%-20s %12.0f %8.3f %12.0f %8.3f %8.0f/%-7.0f %8.0f/%-7.0f\n", way, f.produceBps, f.produceBps / *q,
			f.consumeBps, f.consumeBps / *q, f.produceAvg, f.produceMax, f.fetchAvg, f.fetchMax)
		if way == "kafka broker quota" {
			must(setBrokerQuotas(c, id, 0, "producer_byte_rate", "consumer_byte_rate"))
		}
	}
}

// javaToolsRun produces expect·Q·(warmup+measure) bytes with
// ProducerPerformance, then consumes them with ConsumerPerformance.
func javaToolsRun(c *kafka.Cluster, bootstrap, id string, expect float64) (javaFigures, error) {
	var f javaFigures
	dir, err := os.MkdirTemp("", "realquota-tools")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	records := int(expect * *q * (*warmup + *measure).Seconds() / float64(*recSize))
	prod := c.Java(dir, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", id, "--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(*recSize), "--throughput", "-1",
		"--print-metrics", "--producer-props", "bootstrap.servers="+bootstrap, "client.id="+id, "acks=all", "compression.type=none")
	out, err := prod.Output()
	if err != nil {
		return f, fmt.Errorf("ProducerPerformance: %w", err)
	}
	var sum float64
	var n int
	for _, l := range strings.Split(string(out), "\n") {
		if m := windowLine.FindStringSubmatch(l); m != nil {
			n++
			if time.Duration(n)*5*time.Second <= *warmup {
				continue
			}
			recs, _ := strconv.ParseFloat(m[2], 64)
			sum += recs * float64(*recSize)
		}
	}
	if k := n - int(*warmup/(5*time.Second)); k > 0 {
		f.produceBps = sum / float64(k)
	}
	pm := kafka.PerfMetrics(string(out), id)
	f.produceAvg, f.produceMax = pm["producer-metrics:produce-throttle-time-avg"], pm["producer-metrics:produce-throttle-time-max"]

	props := filepath.Join(dir, "consumer.properties")
	if err := os.WriteFile(props, []byte("client.id="+id+"\nauto.offset.reset=earliest\n"), 0o644); err != nil {
		return f, err
	}
	configFlag := "--command-config"
	if strings.HasPrefix(c.Version, "3.") {
		configFlag = "--consumer.config"
	}
	cons := c.Java(dir, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", id,
		"--messages", strconv.Itoa(records), "--print-metrics", "--show-detailed-stats", "--reporting-interval", "5000",
		"--timeout", "120000", "--group", id, configFlag, props)
	out, err = cons.Output()
	if err != nil {
		return f, fmt.Errorf("ConsumerPerformance: %w", err)
	}
	sum, n = 0, 0
	k := 0
	for _, l := range strings.Split(string(out), "\n") {
		if m := consumerWindow.FindStringSubmatch(l); m != nil {
			n++
			if time.Duration(n)*5*time.Second <= *warmup {
				continue
			}
			mbs, _ := strconv.ParseFloat(m[2], 64)
			sum += mbs * 1024 * 1024
			k++
		}
	}
	if k > 0 {
		f.consumeBps = sum / float64(k)
	}
	cm := kafka.PerfMetrics(string(out), id)
	f.fetchAvg, f.fetchMax = cm["consumer-fetch-manager-metrics:fetch-throttle-time-avg"], cm["consumer-fetch-manager-metrics:fetch-throttle-time-max"]
	return f, nil
}

// setBrokerQuotas sets (v > 0) or removes Kafka's own quota keys on
// client-id id, on the brokers.
func setBrokerQuotas(c *kafka.Cluster, id string, v float64, keys ...string) error {
	err := withAdmin(c, func(ctx context.Context, adm *kadm.Client) error {
		var ops []kadm.AlterClientQuotaOp
		for _, k := range keys {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v, Remove: v == 0})
		}
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &id}}, Ops: ops,
		}})
		if err == nil && res[0].Err != nil {
			err = fmt.Errorf("the brokers' AlterClientQuotas: %w", res[0].Err)
		}
		return err
	})
	if err == nil && v > 0 {
		time.Sleep(2 * time.Second) // the brokers apply it from the metadata log
	}
	return err
}

// setTollgateQuotas sets Tollgate's quota keys on client-id id through its
// Kafka API, as kafka-configs would.
func setTollgateQuotas(gw *app.App, id string, v float64, keys ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw.Bootstrap()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var ops []kadm.AlterClientQuotaOp
	for _, k := range keys {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &id}},
		Ops:    ops,
	}})
	if err == nil && res[0].Err != nil {
		err = fmt.Errorf("Tollgate's AlterClientQuotas: %w", res[0].Err)
	}
	return err
}
