// Command tollgate is the Kafka-protocol quota gateway.
//
//	tollgate serve [--config tollgate.yaml]   run the gateway (embedded dev cluster when no upstream);
//	                                          SIGHUP reloads the config (and hands over to a replaced
//	                                          binary), SIGUSR2 hands over to the binary, SIGTERM drains
//	tollgate validate FILE                    check a config file offline
//	tollgate configs ...                      kafka-configs.sh's flags for quotas and broker configs
//	tollgate quotas apply|resolve ...         declarative quotas; which quota applies to a client
//	tollgate perf produce|consume ...         load generator with the client throttle metrics
//	tollgate apikeys create|list|revoke       API keys, through the admin HTTP port
//	tollgate tenants list|describe|create|alter|delete  tenants, through the admin HTTP port
//	tollgate usage [--since 24h] [--by user]  the usage ledger (chargeback), as a table, CSV or JSON
//	tollgate credentials add-user ...         SCRAM users for a credentials file
//	tollgate doctor --config F                check the host and the upstream before a start
//	tollgate health [--url U]                 probe the admin port (the image's health check)
//	tollgate completion bash|zsh|fish         shell completion script
//	tollgate version [--json]                 version, commit, build date, Go version
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

func main() {
	accept.RunAcceptorHelper() // when started as the gateway's acceptor helper, runs it and exits
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type command struct {
	name, usage string
	run         func(args []string, stdout, stderr io.Writer) int
	// subs are the command's subcommands (shell completion).
	subs []string
	// flags returns the command's flag set (shell completion, tests); nil:
	// completion reads the flags from the command's -h output.
	flags func() *flag.FlagSet
}

func commands() []command {
	return []command{
		{name: "serve", usage: "run the gateway", run: serve, flags: func() *flag.FlagSet { return serveFlags(new(string), io.Discard) }},
		{name: "validate", usage: "check a config file offline", run: validate, flags: noFlags("validate")},
		{name: "doctor", usage: "check that the host and the upstream can carry Tollgate; exit 0 when safe to start", run: doctorCmd, flags: func() *flag.FlagSet { return doctorFlags(new(doctorOpts), io.Discard) }},
		{name: "configs", usage: "describe and alter client quotas (kafka-configs.sh flags and output)", run: cli.Configs},
		{name: "quotas", usage: "apply a quota file; resolve which quota applies to a client; import the brokers' own; suggest quotas from usage", run: cli.Quotas, subs: []string{"apply", "resolve", "import", "suggest"}},
		{name: "apikeys", usage: "create, list and revoke API keys (through the admin HTTP port)", run: cli.APIKeys, subs: []string{"create", "list", "revoke"}},
		{name: "tenants", usage: "list, describe, create, alter and delete tenants (through the admin HTTP port)", run: cli.Tenants, subs: []string{"list", "describe", "create", "alter", "delete"}},
		{name: "usage", usage: "report the usage ledger: bytes, requests, throttle and partition mutations per user or client id", run: cli.Usage},
		{name: "credentials", usage: "add SCRAM users to a credentials file", run: cli.Credentials, subs: []string{"add-user"}},
		{name: "perf", usage: "produce or consume load; report throughput, latency and client throttle metrics", run: perf.Run, subs: []string{"produce", "consume"}},
		{name: "health", usage: "probe the admin port's /readyz (the container image's health check)", run: health, flags: func() *flag.FlagSet { return healthFlags(new(healthOpts), io.Discard) }},
		{name: "completion", usage: "print a shell completion script: bash, zsh or fish", run: completion, subs: shells, flags: noFlags("completion")},
		{name: "version", usage: "print the version, commit, build date and Go version", run: versionCmd, flags: func() *flag.FlagSet { return versionFlags(new(bool), io.Discard) }},
	}
}

func noFlags(name string) func() *flag.FlagSet {
	return func() *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }
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
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.usage)
	}
}

// serveFlags are serve's flags; the Kubernetes manifests' test checks
// their args against it.
func serveFlags(path *string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(path, "config", "", "YAML config `file` (default: built-in config with the embedded dev cluster)")
	return fs
}

// statusServing is the service's status text while it serves; the
// packages' post-install script reads it ("hands over") to tell a running
// version that can take an upgrade by reload.
const statusServing = "Serving; systemctl reload hands over to a replaced binary without refusing a connection"

func serve(args []string, stdout, stderr io.Writer) int {
	path := new(string)
	if err := serveFlags(path, stderr).Parse(args); err != nil {
		return 2
	}
	// First: an uncaught SIGHUP or SIGUSR2 ends the process.
	ctl := make(chan os.Signal, 2)
	signal.Notify(ctl, syscall.SIGHUP, syscall.SIGUSR2)
	defer signal.Stop(ctl)
	// Started by a handover: the old process's listening sockets. If this
	// process fails before it serves, closing them (and the control
	// socket) tells the old one, which carries on.
	inh, err := accept.Inherit()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	defer inh.Close()
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
	self := startedFrom(exe)
	binary := newRunningBinary(self)
	a, err := app.Start(ctx, cfg, app.Options{ConfigPath: *path, AcceptorExe: exe, Inherited: inh, Version: currentBuild().Version})
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	announceReady(a, inh, stdout, stderr)
	if awaitEnd(ctx, ctl, a, binary, self) {
		fmt.Fprintln(stdout, "Handed over to a new process: finishing in-flight requests...")
		stop()
		if err := a.Stop(context.Background()); err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			return 1
		}
		return 0
	}
	stop()
	sdNotify("STOPPING=1")
	fmt.Fprintln(stdout, "Shutting down: finishing in-flight requests...")
	if err := a.Stop(context.Background()); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

// announceReady tells the user, systemd and, after a handover, the old
// process that a is serving.
func announceReady(a *app.App, inh *accept.Inherited, stdout, stderr io.Writer) {
	fmt.Fprintf(stdout, "Tollgate is ready. Bootstrap servers: %s\n", a.Bootstrap())
	if u := a.HTTPURL(); u != "" {
		fmt.Fprintf(stdout, "Dashboard: %s/  Metrics: %s/metrics\n", u, u)
	}
	state := "READY=1\nSTATUS=" + statusServing
	if inh != nil {
		// The service's main process from now on: said before the old
		// one is told, so that its exit is not the service's.
		state = fmt.Sprintf("MAINPID=%d\n%s", os.Getpid(), state)
	}
	if err := sdNotify(state); err != nil {
		fmt.Fprintln(stderr, "tollgate: sd_notify:", err)
	}
	if inh != nil {
		if err := inh.Serving(); err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
		}
		inh.Close()
	}
}

// awaitEnd serves until ctx is done or a handover succeeds, reloading the
// config on SIGHUP; it reports whether a handover did.
func awaitEnd(ctx context.Context, ctl <-chan os.Signal, a *app.App, binary runningBinary, self string) bool {
	for ctx.Err() == nil {
		select {
		case sig := <-ctl:
			if sig == syscall.SIGHUP {
				a.Reload() // errors are logged; the running config stays
				if !binary.replaced() {
					continue
				}
			}
			// SIGUSR2, or SIGHUP after an upgrade replaced the binary:
			// hand over to the binary at the path this process was
			// started from (errors are logged; this process then serves
			// on).
			sdNotify("STATUS=Handing over to a new process")
			if err := a.HandOver(ctx, self, os.Args[1:]); err != nil {
				sdNotify("STATUS=" + statusServing + " (the last handover failed: see the log)")
				continue
			}
			return true
		case <-ctx.Done():
		}
	}
	return false
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
