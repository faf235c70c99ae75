// Command realquota is the head-to-head on a real Apache Kafka cluster
// (the test kit's 3 KRaft nodes, internal/testkit/kafka): the same client
// and the same producer quota Q on one client-id, (a) straight to Kafka
// with Kafka's own broker quota set (AlterClientQuotas on the brokers), (b)
// through Tollgate with Tollgate's quota and no broker quota. Kafka
// enforces Q on each broker: a client whose partitions are led by three
// brokers gets about 3·Q. Tollgate enforces Q for the cluster.
//
// The clients: franz-go, and Kafka's own ProducerPerformance (the Java
// producer). The rate is the record bytes acknowledged per second over the
// measured period, after the start-up burst (both a fresh Kafka quota and a
// fresh Tollgate bucket let some seconds of Q through at once).
//
//	go run ./bench/realquota -kafka 4.4.0 -q 262144 -warmup 15s -measure 30s
//	go run ./bench/realquota -kafka 4.4.0 -q 262144 -warmup 10s -measure 20s -run tools
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
	"github.com/tollgate/tollgate/internal/testkit/proc"
)

var (
	version = flag.String("kafka", kafka.DefaultVersion(), "Apache Kafka release")
	q       = flag.Float64("q", 256<<10, "producer_byte_rate of the client-id, bytes/s")
	warmup  = flag.Duration("warmup", 15*time.Second, "start-up period not measured")
	measure = flag.Duration("measure", 30*time.Second, "measured period")
	recSize = flag.Int("record", 1024, "record size")
	parts   = flag.Int("partitions", 6, "partitions of the topic (leaders spread over the 3 brokers)")
	run     = flag.String("run", "clients,tools", "what to run: clients (franz-go and the Java producer), tools (Kafka's perf tools with their throttle metrics)")
)

func main() {
	flag.Parse()
	c, err := kafka.Start(kafka.Config{Version: *version})
	must(err)
	defer c.Stop()
	var rss int64
	for _, n := range c.Nodes() {
		kb, _ := proc.RSSKiB(n.PID())
		rss += kb
	}
	fmt.Printf("Apache Kafka %s: 3 nodes serving %v after the first JVM started (format included), %d MiB resident together\n",
		c.Version, c.Started.Round(time.Millisecond), rss/1024)
	fmt.Printf("Apache Kafka %s, 3 nodes; Q = %.0f B/s on one client-id; %v warm-up, %v measured; %d partitions, %d-byte records, acks=all, no compression\n",
		c.Version, *q, *warmup, *measure, *parts, *recSize)

	gw, err := startTollgate(c)
	must(err)
	defer gw.Stop(context.Background())

	if strings.Contains(*run, "tools") {
		defer javaTools(c, gw)
	}
	if !strings.Contains(*run, "clients") {
		return
	}
	fmt.Printf("%-22s %-28s %10s %8s\n", "client", "way", "B/s", "÷ Q")
	for _, client := range []string{"franz-go", "java"} {
		for _, way := range []string{"kafka broker quota", "tollgate quota"} {
			id := strings.ReplaceAll(fmt.Sprintf("hth-%s-%d", client, time.Now().UnixNano()), " ", "")
			topic := id
			must(createTopic(c, topic))
			bootstrap := strings.Join(c.Bootstrap(kafka.Plaintext), ",")
			if way == "kafka broker quota" {
				must(setBrokerQuotas(c, id, *q, "producer_byte_rate"))
			} else {
				must(setTollgateQuotas(gw, id, *q, "producer_byte_rate"))
				bootstrap = gw.Bootstrap()
			}
			var rate float64
			if client == "franz-go" {
				rate, err = franzGo(bootstrap, id, topic)
			} else {
				rate, err = javaProducer(c, bootstrap, id, topic)
			}
			must(err)
			fmt.Printf("%-22s %-28s %10.0f %8.3f\n", client, way, rate, rate / *q)
			if way == "kafka broker quota" {
				must(setBrokerQuotas(c, id, 0, "producer_byte_rate"))
			}
		}
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "realquota:", err)
		os.Exit(1)
	}
}

func startTollgate(c *kafka.Cluster) (*app.App, error) {
	dir, err := os.MkdirTemp("", "realquota")
	if err != nil {
		return nil, err
	}
	cfg := app.Config{
		Listeners: []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: benchkit.FreeAddr()}},
		Upstream:  app.UpstreamConfig{Bootstrap: c.Bootstrap(kafka.Plaintext)},
		DataDir:   dir,
	}
	cfg.Authorization.QuotaAdmins = []string{"ANONYMOUS"} // the bench sets its quota as kafka-configs would
	return app.Start(context.Background(), cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
}

// withAdmin runs fn with an admin client of the cluster and 30 s.
func withAdmin(c *kafka.Cluster, fn func(context.Context, *kadm.Client) error) error {
	cl, err := kgo.NewClient(c.AdminOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl))
}

func createTopic(c *kafka.Cluster, topic string) error {
	return withAdmin(c, func(ctx context.Context, adm *kadm.Client) error {
		_, err := adm.CreateTopic(ctx, int32(*parts), -1, nil, topic)
		return err
	})
}

// franzGo produces as fast as it is let for warmup+measure and returns
// the record bytes acknowledged per second in the measured period.
func franzGo(bootstrap, id, topic string) (float64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID(id),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(512))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var acked atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), *warmup+*measure)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			v := make([]byte, *recSize)
			rand.Read(v)
			cl.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	time.Sleep(*warmup)
	b0, t0 := acked.Load(), time.Now()
	<-ctx.Done()
	return float64(acked.Load()-b0) / time.Since(t0).Seconds(), nil
}

// windowLine is ProducerPerformance's progress line (every 5 s).
var windowLine = regexp.MustCompile(`^(\d+) records sent, ([\d.]+) records/sec`)

// javaProducer runs Kafka's ProducerPerformance (the Java producer) for
// warmup+measure and returns the mean of its 5 s windows' record bytes per
// second in the measured period.
func javaProducer(c *kafka.Cluster, bootstrap, id, topic string) (float64, error) {
	dir, err := os.MkdirTemp("", "realquota-java")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	cmd := c.Java(dir, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", "1000000000", "--record-size", strconv.Itoa(*recSize), "--throughput", "-1",
		"--producer-props", "bootstrap.servers="+bootstrap, "client.id="+id, "acks=all", "compression.type=none")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	start := time.Now()
	var sum float64
	var n int
	sc := bufio.NewScanner(out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			m := windowLine.FindStringSubmatch(sc.Text())
			if m == nil || time.Since(start) < *warmup+5*time.Second {
				continue // a window that began in the warm-up
			}
			recs, _ := strconv.ParseFloat(m[2], 64)
			sum += recs * float64(*recSize)
			n++
		}
	}()
	time.Sleep(*warmup + *measure)
	cmd.Process.Kill()
	cmd.Wait()
	<-done
	if n == 0 {
		return 0, fmt.Errorf("ProducerPerformance printed no window in the measured period")
	}
	return sum / float64(n), nil
}
