package kafkaapi

import (
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/tollgate/tollgate/internal/wire"
)

var (
	adminUser = principal.Principal{Type: "User", Name: "admin"}
	aliceUser = principal.Principal{Type: "User", Name: "alice"}
)

// connAs is a connection of p on an authenticated PLAINTEXT listener named
// EXTERNAL, from 192.168.1.5:53000, to node 0, whose gateway host is
// gw.example with node 0 on port 40000 and node 1 on 40001.
func connAs(p principal.Principal) *proxytest.Conn {
	return &proxytest.Conn{
		ConnInfo: principal.ConnInfo{
			ID: 1, Listener: "EXTERNAL", NodeID: 0, Principal: p,
			Remote: netip.MustParseAddrPort("192.168.1.5:53000"),
		},
		Config:  proxy.ListenerConfig{Name: "EXTERNAL", Bootstrap: "gw.example:9092"},
		Cluster: "cluster-A",
		Host:    "gw.example",
		Ports:   map[int32]int32{0: 40000, 1: 40001},
	}
}

// exchange is one request run through one filter the way a session runs
// it: the request hook, then either the local answer or the forwarded
// request, the upstream's answer, the verdict's Merge and the response
// hook.
type exchange struct {
	req     *proxy.Request
	verdict proxy.Verdict
	// sent is what the upstream received, decoded from the bytes the
	// session would write; nil when nothing was forwarded.
	sent kmsg.Request
	// resp is what the client received, decoded from the frame the
	// session would write; nil when the verdict closed the connection.
	resp kmsg.Response
}

// answeredLocally reports whether the filter answered without the broker.
func (x exchange) answeredLocally() bool { return x.verdict.Respond != nil }

// pass runs req (at its version) through f on connection c. upstream
// answers what is forwarded; a nil upstream fails the test if anything is.
func pass(t *testing.T, f proxy.Filter, c proxy.Conn, req kmsg.Request, upstream func(kmsg.Request) kmsg.Response) exchange {
	t.Helper()
	r, err := proxytest.Request(req, 7)
	if err != nil {
		t.Fatalf("frame %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	x := exchange{req: r}
	if h, ok := f.(proxy.RequestHook); ok {
		x.verdict = h.OnRequest(c, r)
	}
	v := x.verdict
	if v.Close != "" {
		return x
	}
	if v.Respond != nil {
		if v.Forward != nil || v.Merge != nil {
			t.Fatalf("%s: a verdict both answers and forwards", f.Name())
		}
		// The session frames the local answer at the request's version
		// and correlation id; response hooks do not see it.
		v.Respond.SetVersion(r.Version)
		buf := wire.EncodeResponse(r.CorrelationID, r.Flexible, v.Respond)
		resp, ok := (&proxy.Response{Req: r, Buf: buf}).Decode()
		if !ok {
			t.Fatalf("%s: the local answer to %s v%d does not decode", f.Name(), kmsg.NameForKey(r.Key), r.Version)
		}
		if got := wire.CorrelationID(buf.B[4:]); got != r.CorrelationID {
			t.Fatalf("local answer correlation id %d, want %d", got, r.CorrelationID)
		}
		x.resp = resp
		return x
	}
	// What the session writes upstream: the client's frame (possibly
	// patched in place), or the verdict's Forward re-encoded at the
	// request's version.
	out := r
	if v.Forward != nil {
		v.Forward.SetVersion(r.Version)
		if out, err = proxytest.Request(v.Forward, r.CorrelationID); err != nil {
			t.Fatalf("%s: the forwarded request does not frame: %v", f.Name(), err)
		}
	}
	sent := kmsg.RequestForKey(out.Key)
	sent.SetVersion(out.Version)
	if err := sent.ReadFrom(out.Payload[out.BodyOffset:]); err != nil {
		t.Fatalf("%s: the forwarded %s v%d does not decode: %v", f.Name(), kmsg.NameForKey(out.Key), out.Version, err)
	}
	x.sent = sent
	if upstream == nil {
		t.Fatalf("%s: %s was forwarded, want it answered locally (verdict %+v)", f.Name(), kmsg.NameForKey(r.Key), v)
	}
	pr := proxytest.Response(r, upstream(sent))
	if v.Merge != nil {
		if err := wire.Edit(pr.Buf, r.Key, r.Version, r.Flexible, v.Merge); err != nil {
			t.Fatalf("merge: %v", err)
		}
	}
	if h, ok := f.(proxy.ResponseHook); ok {
		if err := h.OnResponse(c, pr); err != nil {
			t.Fatalf("%s: OnResponse: %v", f.Name(), err)
		}
	}
	resp, ok := proxytest.Decode(pr)
	if !ok {
		t.Fatalf("%s: the response to %s v%d does not decode", f.Name(), kmsg.NameForKey(r.Key), r.Version)
	}
	x.resp = resp
	return x
}

// respond runs an upstream answer to req through f's response hook alone
// and returns what the client receives.
func respond(t *testing.T, f proxy.ResponseHook, c proxy.Conn, req kmsg.Request, resp kmsg.Response) kmsg.Response {
	t.Helper()
	r, err := proxytest.Request(req, 9)
	if err != nil {
		t.Fatal(err)
	}
	pr := proxytest.Response(r, resp)
	if err := f.OnResponse(c, pr); err != nil {
		t.Fatalf("OnResponse: %v", err)
	}
	got, ok := proxytest.Decode(pr)
	if !ok {
		t.Fatalf("the rewritten %s v%d does not decode", kmsg.NameForKey(r.Key), r.Version)
	}
	return got
}

// controlPlane is the real control package over a bbolt store in a
// temporary directory, built as internal/app builds it: User:admin is the
// only quota admin.
type controlPlane struct {
	store   *store.Store
	audit   *audit.Logger
	quotas  *control.ClientQuotas
	creds   *control.Credentials
	brokers *control.BrokerConfigs
	// quotaChanges and brokerChanges count the OnChange calls.
	quotaChanges, brokerChanges atomic.Int32
	lastQuotas                  atomic.Pointer[model.Quotas]
}

func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp := &controlPlane{store: st, audit: audit.NewLogger(audit.Config{})}
	authz := control.Admins{Principals: []string{"User:admin"}}
	cp.quotas = &control.ClientQuotas{
		Store: st, Audit: cp.audit, Authz: authz,
		OnChange: func(q model.Quotas, _ control.IPQuotas) {
			cp.quotaChanges.Add(1)
			cp.lastQuotas.Store(&q)
		},
	}
	cp.creds = &control.Credentials{Store: st, Audit: cp.audit, Authz: authz}
	if err := cp.creds.Load(); err != nil {
		t.Fatal(err)
	}
	cp.brokers = &control.BrokerConfigs{
		Store: st, Audit: cp.audit, Authz: authz,
		// Kafka's defaults of the owned keys, as app's
		// brokerConfigDefaults gives them for one listener.
		Defaults: map[string]string{
			"max.connections":                                     "2147483647",
			"max.connections.per.ip":                              "2147483647",
			"max.connections.per.ip.overrides":                    "",
			"max.connection.creation.rate":                        "2147483647",
			"listener.name.external.max.connections":              "2147483647",
			"listener.name.external.max.connection.creation.rate": "2147483647",
		},
		OnChange: func(map[string]string) { cp.brokerChanges.Add(1) },
	}
	return cp
}

// dynamic is the owned broker configs set through the API.
func (cp *controlPlane) dynamic(t *testing.T) map[string]string {
	t.Helper()
	d, err := cp.brokers.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lastAudit is the most recent audit event.
func (cp *controlPlane) lastAudit(t *testing.T) audit.Event {
	t.Helper()
	ev := cp.audit.Recent(1)
	if len(ev) == 0 {
		t.Fatal("nothing was audited")
	}
	return ev[0]
}

func str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
