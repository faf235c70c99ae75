package doctor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// client is a franz-go client for the upstream with the configured security
// and the doctor's bounded timeouts.
func (r *runner) client(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.t.Upstream...),
		kgo.DialTimeout(r.t.DialTimeout),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(2 * r.t.DialTimeout),
		kgo.ClientID("tollgate-doctor"),
	}
	opts = append(opts, r.t.Client...)
	return kgo.NewClient(append(opts, extra...)...)
}

// upstream: the bootstrap servers accept TCP connections and one of them
// answers Metadata through the configured TLS and SASL.
func (r *runner) upstream(ctx context.Context) Result {
	res := Result{Check: "upstream"}
	if len(r.t.Upstream) == 0 {
		n := r.t.DevBrokers
		if n <= 0 {
			n = 3
		}
		for i := range n {
			r.brokers = append(r.brokers, broker{ID: int32(i), Host: "127.0.0.1"})
		}
		res.Status = Warn
		res.Detail = fmt.Sprintf("no upstream.bootstrap: Tollgate will start the embedded development cluster (%d brokers, in memory)", n)
		res.Fix = "set upstream.bootstrap to the brokers Tollgate fronts; the embedded cluster loses every record when Tollgate stops"
		return res
	}
	errs := make([]error, len(r.t.Upstream))
	var wg sync.WaitGroup
	for i, seed := range r.t.Upstream {
		wg.Go(func() { errs[i] = r.dial(ctx, seed) })
	}
	wg.Wait()
	var down []string
	for i, err := range errs {
		if err != nil {
			down = append(down, fmt.Sprintf("%s: %v", r.t.Upstream[i], err))
		}
	}
	if len(down) == len(r.t.Upstream) {
		res.Status = Fail
		res.Detail = "no bootstrap server reachable: " + strings.Join(down, "; ")
		res.Fix = "check upstream.bootstrap (host:port of a broker listener for clients), DNS, and the firewall between this host and the brokers"
		return res
	}
	cl, err := r.client()
	if err != nil {
		res.Status, res.Detail = Fail, err.Error()
		res.Fix = "fix upstream.tls / upstream.sasl"
		return res
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 3*r.t.DialTimeout)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(mctx)
	if err != nil {
		res.Status = Fail
		res.Detail = fmt.Sprintf("connected, but Metadata failed: %v", err)
		res.Fix = "check that upstream.bootstrap is a Kafka listener and that upstream.tls and upstream.sasl match its security protocol (the error names the step that failed)"
		return res
	}
	for _, b := range md.Brokers {
		r.brokers = append(r.brokers, broker{ID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	slices.SortFunc(r.brokers, func(a, b broker) int { return int(a.ID) - int(b.ID) })
	r.cluster = md.Cluster
	ids := make([]string, len(r.brokers))
	for i, b := range r.brokers {
		ids[i] = fmt.Sprint(b.ID)
	}
	res.Detail = fmt.Sprintf("cluster %s: %d brokers (node ids %s)", md.Cluster, len(r.brokers), strings.Join(ids, ", "))
	if len(down) > 0 {
		res.Status = Warn
		res.Detail += "; unreachable seeds: " + strings.Join(down, "; ")
		res.Fix = "remove or fix the unreachable entries of upstream.bootstrap: a restart needs one that answers"
	}
	return res
}

func (r *runner) dial(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: r.t.DialTimeout, Resolver: r.t.Resolver}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// haveBrokers starts a check of the upstream's brokers: false, with res
// filled in, when there is nothing to check — the embedded cluster (fine,
// for the reason embedded gives) or an upstream that did not answer
// Metadata (a warning).
func (r *runner) haveBrokers(res *Result, embedded string) bool {
	switch {
	case len(r.t.Upstream) == 0:
		res.Detail = embedded
		return false
	case r.brokers == nil:
		res.Status = Warn
		res.Detail = "not checked: the upstream did not answer Metadata"
		res.Fix = "fix the upstream check first"
		return false
	}
	return true
}

// brokerClient opens a client for a check that asks the brokers, bounded
// by two dial timeouts: ok false when there are none to ask (res says
// why). done closes it.
func (r *runner) brokerClient(ctx context.Context, res *Result, embedded string) (cl *kgo.Client, qctx context.Context, done func(), ok bool) {
	if !r.haveBrokers(res, embedded) {
		return nil, nil, nil, false
	}
	cl, err := r.client()
	if err != nil {
		res.Status, res.Detail = Warn, "not checked: "+err.Error()
		return nil, nil, nil, false
	}
	qctx, cancel := context.WithTimeout(ctx, 2*r.t.DialTimeout)
	return cl, qctx, func() { cancel(); cl.Close() }, true
}

// advertised: every broker address from Metadata resolves and accepts
// connections from here, since each client connection is forwarded to the
// broker at the address that broker advertises.
func (r *runner) advertised(ctx context.Context) Result {
	res := Result{Check: "advertised addresses"}
	if !r.haveBrokers(&res, "embedded cluster: its brokers listen on this host") {
		return res
	}
	problems := make([]string, len(r.brokers))
	var wg sync.WaitGroup
	for i, b := range r.brokers {
		wg.Go(func() {
			if net.ParseIP(b.Host) == nil {
				lctx, cancel := context.WithTimeout(ctx, r.t.DialTimeout)
				_, err := r.t.Resolver.LookupHost(lctx, b.Host)
				cancel()
				if err != nil {
					problems[i] = fmt.Sprintf("broker %d advertises %s, which does not resolve here (%v)", b.ID, b.Host, err)
					return
				}
			}
			if err := r.dial(ctx, b.addr()); err != nil {
				problems[i] = fmt.Sprintf("broker %d at %s is unreachable (%v)", b.ID, b.addr(), err)
			}
		})
	}
	wg.Wait()
	problems = slices.DeleteFunc(problems, func(s string) bool { return s == "" })
	if len(problems) > 0 {
		res.Status = Fail
		res.Detail = strings.Join(problems, "; ")
		res.Fix = "Tollgate forwards each client to the address its broker advertises (advertised.listeners of the listener upstream.bootstrap points at): make those names resolve from this host (DNS or /etc/hosts) and their ports reachable, or bootstrap from a listener whose advertised addresses are"
		return res
	}
	addrs := make([]string, len(r.brokers))
	for i, b := range r.brokers {
		addrs[i] = b.addr()
	}
	res.Detail = "all resolve and accept connections: " + strings.Join(addrs, ", ")
	return res
}
