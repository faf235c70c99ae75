// Command tollgate is the Kafka-protocol quota gateway.
//
//	tollgate serve [--config tollgate.yaml]   run the gateway (embedded dev cluster when no upstream)
//	tollgate validate FILE                    check a config file offline
//	tollgate configs ...                      kafka-configs.sh's flags for quotas and broker configs
//	tollgate quotas apply|resolve ...         declarative quotas; which quota applies to a client
//	tollgate perf produce|consume ...         load generator with the client throttle metrics
//	tollgate apikeys create|list|revoke       API keys, through the admin HTTP port
//	tollgate credentials add-user ...         SCRAM users for a credentials file
//	tollgate version                          print the version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/cli"
	"github.com/tollgate/tollgate/internal/perf"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	accept.RunAcceptorHelper() // when started as the gateway's acceptor helper, runs it and exits
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type command struct {
	name, usage string
	run         func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the gateway", serve},
		{"validate", "check a config file offline", validate},
		{"configs", "describe and alter client quotas (kafka-configs.sh flags and output)", cli.Configs},
		{"quotas", "apply a quota file; resolve which quota applies to a client", cli.Quotas},
		{"apikeys", "create, list and revoke API keys (through the admin HTTP port)", cli.APIKeys},
		{"credentials", "add SCRAM users to a credentials file", cli.Credentials},
		{"perf", "produce or consume load; report throughput, latency and client throttle metrics", perf.Run},
		{"version", "print the version", func(_ []string, stdout, _ io.Writer) int {
			fmt.Fprintln(stdout, "tollgate", version)
			return 0
		}},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tollgate <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.usage)
	}
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "YAML config file (default: built-in config with the embedded dev cluster)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := app.Default()
	if *path != "" {
		var err error
		if cfg, err = app.Load(*path); err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, _ := os.Executable()
	a, err := app.Start(ctx, cfg, app.Options{ConfigPath: *path, AcceptorExe: exe})
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "Tollgate is ready. Bootstrap servers: %s\n", a.Bootstrap())
	if u := a.HTTPURL(); u != "" {
		fmt.Fprintf(stdout, "Dashboard: %s/  Metrics: %s/metrics\n", u, u)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for ctx.Err() == nil {
		select {
		case <-hup:
			a.Reload() // errors are logged; the running config stays
		case <-ctx.Done():
		}
	}
	stop()
	fmt.Fprintln(stdout, "Shutting down: finishing in-flight requests...")
	if err := a.Stop(context.Background()); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

func validate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: tollgate validate FILE")
		return 2
	}
	if _, err := app.Load(args[0]); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[0])
	return 0
}
