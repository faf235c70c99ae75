// Command kafkadev starts the test kit's real Kafka cluster for a user's
// own try (scripts/kafka-dev.sh runs it): three KRaft nodes on loopback,
// from Maven Central's jars, and prints the upstream block of a Tollgate
// config that fronts it. It runs until interrupted, then stops the nodes;
// with -dir the data stays for the next start.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

func main() {
	version := flag.String("version", kafka.DefaultVersion(), "Apache Kafka release: "+strings.Join(kafka.Versions, ", "))
	base := flag.Int("base-port", 29092, "node i listens on base+10i (PLAINTEXT), +1 (SASL_PLAINTEXT), +2 (SSL), +3 (controller); 0: free ports")
	dir := flag.String("dir", "", "data, configs and logs; empty: a temporary directory, removed at exit")
	heap := flag.Int("heap-mb", 512, "each node's maximum Java heap")
	fetch := flag.Bool("fetch", false, "only fetch the jars of every release the test kit runs ("+strings.Join(kafka.Versions, ", ")+") into the cache, and exit")
	flag.Parse()

	if *fetch {
		for _, v := range kafka.Versions {
			dir, err := kafka.Classpath(v)
			if err != nil {
				fmt.Fprintln(os.Stderr, "kafka-dev:", err)
				os.Exit(1)
			}
			fmt.Printf("Apache Kafka %s: %s\n", v, dir)
		}
		return
	}

	fmt.Fprintf(os.Stderr, "starting Apache Kafka %s: 3 KRaft nodes on 127.0.0.1 (the jars are fetched once into %s)...\n", *version, kafka.CacheDir())
	c, err := kafka.Start(kafka.Config{Version: *version, BasePort: *base, Dir: *dir, HeapMB: *heap})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-dev:", err)
		os.Exit(1)
	}
	state, err := c.WriteState()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-dev:", err)
	}
	fmt.Print(c.TollgateConfig())
	fmt.Printf("#\n# Tests attach to this cluster with TOLLGATE_KAFKA_CLUSTER=%s\n# Ctrl-C stops it.\n", state)
	fmt.Fprintf(os.Stderr, "Kafka %s is serving (started in %v); Tollgate's config was printed to standard output. Ctrl-C stops it.\n",
		c.Version, c.Started.Round(time.Millisecond))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Fprintln(os.Stderr, "stopping Kafka")
	c.Stop()
}
