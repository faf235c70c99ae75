// Package doctor checks, before Tollgate starts, that the host and the
// upstream cluster can carry it: the upstream answers and its advertised
// addresses resolve from here, the ports are free, data_dir is writable on a
// filesystem that honours fsync, the TLS files load and are not about to
// expire, the open-files limit covers max.connections, and the clocks agree
// with the brokers'. Each check is one function returning a Result with a
// fix for anything not OK; Safe says whether it is safe to start.
//
// The package takes its input as a Target (built by cmd/tollgate from the
// config) so that it depends on neither the composition root nor the data path.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/admission"
)

// Status is a check's verdict.
type Status int

const (
	// OK: nothing to do.
	OK Status = iota
	// Warn: Tollgate can start, but something deserves attention (or the
	// check could not tell).
	Warn
	// Fail: starting now would fail or lose data.
	Fail
)

func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Warn:
		return "WARN"
	}
	return "FAIL"
}

// MarshalText writes the status as OK, WARN or FAIL.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads OK, WARN or FAIL.
func (s *Status) UnmarshalText(b []byte) error {
	for _, v := range []Status{OK, Warn, Fail} {
		if string(b) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("doctor: status %q: want OK, WARN or FAIL", b)
}

// Result is the outcome of one check.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do when Status is not OK.
	Fix string `json:"fix,omitempty"`
}

// Listener is the part of a listener's configuration the checks need.
type Listener struct {
	Name           string
	Bootstrap      string
	AdvertisedHost string
	BrokerPortBase int
}

// TLSFiles are the files of one TLS configuration.
type TLSFiles struct {
	// Name says where they are configured ("listener EXTERNAL", "upstream").
	Name string
	// CertFile and KeyFile are a certificate chain and its key; both may be
	// empty (upstream TLS without a client certificate).
	CertFile, KeyFile string
	// CAFile is a PEM bundle (client CA of a listener, broker CA upstream).
	CAFile string
	// Hosts are names clients verify the certificate against (a listener's
	// advertised host); a certificate that does not cover one gets a warning.
	Hosts []string
}

// Target is what to check: the parts of the configuration that meet the
// host and the upstream cluster.
type Target struct {
	// Upstream is the upstream bootstrap list; empty means the embedded
	// development cluster, with DevBrokers brokers (node ids 0..n-1).
	Upstream   []string
	DevBrokers int
	// Client are the franz-go options every upstream connection needs
	// (TLS, SASL); the checks add the seeds and timeouts.
	Client []kgo.Opt
	// DialTimeout bounds each connection attempt (default 10s).
	DialTimeout time.Duration

	Listeners []Listener
	// HTTPAddress is the admin port ("" when disabled).
	HTTPAddress string
	// DataDir holds the store.
	DataDir string
	TLS     []TLSFiles
	// Admission is the connection-quota settings from the file (listeners
	// declared, broker_configs applied): the open-files check sizes the
	// limit from them.
	Admission admission.Settings

	// ClockTopic is the topic the clock check produces one record per
	// broker to (created with message.timestamp.type=LogAppendTime when
	// missing). Empty: the clock check is skipped with a warning.
	ClockTopic string

	// Cluster names the Tollgate cluster's topics (nil: not in one; the
	// cluster topics check is not run).
	Cluster *ClusterTopics

	// Now is the local clock (default time.Now).
	Now func() time.Time
	// Resolver resolves broker hosts (default net.DefaultResolver).
	Resolver *net.Resolver
	// OpenFilesLimit returns the soft RLIMIT_NOFILE (default: the process's
	// own, which the Go runtime has raised to the hard limit, as it does for
	// `tollgate serve`).
	OpenFilesLimit func() (uint64, error)
}

// DefaultClockTopic is where the clock check writes unless told otherwise.
const DefaultClockTopic = "tollgate-doctor"

// runner carries what one check learns for the next ones.
type runner struct {
	t Target
	// brokers are the upstream brokers from Metadata (nil when unknown).
	brokers []broker
	// cluster is the upstream cluster id.
	cluster string
}

type broker struct {
	ID   int32
	Host string
	Port int32
}

func (b broker) addr() string { return net.JoinHostPort(b.Host, fmt.Sprint(b.Port)) }

// Run performs every check in order and returns their results.
func Run(ctx context.Context, t Target) []Result {
	r := newRunner(t)
	out := []Result{r.upstream(ctx), r.advertised(ctx), r.ports()}
	out = append(out, r.dataDir(), r.filesystem())
	out = append(out, r.tlsFiles()...)
	out = append(out, r.openFiles(), r.clock(ctx), r.brokerQuotas(ctx))
	if r.t.Cluster != nil {
		out = append(out, r.clusterTopics(ctx))
	}
	return out
}

func newRunner(t Target) *runner {
	if t.Now == nil {
		t.Now = time.Now
	}
	if t.Resolver == nil {
		t.Resolver = net.DefaultResolver
	}
	if t.DialTimeout <= 0 {
		t.DialTimeout = 10 * time.Second
	}
	if t.OpenFilesLimit == nil {
		t.OpenFilesLimit = openFilesLimit
	}
	return &runner{t: t}
}

// Safe reports whether no check failed: warnings do not stop a start.
func Safe(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return false
		}
	}
	return true
}

// WriteTable prints the results as a table, each fix under its check.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tDETAIL")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Status, r.Check, oneLine(r.Detail))
		if r.Status != OK && r.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", oneLine(r.Fix))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var fails, warns int
	for _, r := range rs {
		switch r.Status {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	verdict := "safe to start"
	if fails > 0 {
		verdict = "NOT safe to start"
	}
	_, err := fmt.Fprintf(w, "\n%d checks, %d failed, %d warnings: %s\n", len(rs), fails, warns, verdict)
	return err
}

// WriteJSON prints the results as one JSON object.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Safe    bool     `json:"safe"`
		Results []Result `json:"results"`
	}{Safe(rs), rs})
}

// oneLine keeps the table a table whatever an error message contains.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
