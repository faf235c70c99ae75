package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// docs/metrics.md lists exactly the tollgate_* metrics a running gateway
// exposes (with quotas, admission and traffic, so every family appears).
func TestMetricsReference(t *testing.T) {
	t.Parallel()
	user, rate := "ANONYMOUS", float64(1<<30)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		// Shadow, so that the shadow series appear too.
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate, Shadow: true}}
		// 127.0.0.2 may not connect at all: a refusal for the per-IP metrics.
		c.BrokerConfigs = map[string]string{"max.connections.per.ip.overrides": "127.0.0.2:0"}
		// A one-instance Tollgate cluster, for the cluster series.
		c.Cluster.ID = "metrics"
		// A shadow tenant, for the tenant series.
		c.Tenants = []app.TenantEntry{{Name: "t", Principals: []string{user}, ProducerByteRate: &rate, Shadow: true}}
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pushEveryChosen(t, ctx, cl) // every family of the clients' own metrics
	cl.Close()                  // a closed connection for tollgate_connections_closed_total
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if c, err := d.Dial("tcp", env.Bootstrap); err == nil {
		expectClosed(t, c)
		c.Close()
	}
	if !env.Logs.WaitFor("reason=client_closed", 5*time.Second) || !env.Logs.WaitFor("connection_limit_max.connections.per.ip", 5*time.Second) {
		t.Fatal("the closes did not happen")
	}
	resp, err := http.Get("http://" + env.App.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for name := range fams {
		if strings.HasPrefix(name, "tollgate_") {
			exposed[name] = true
		}
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(tollgate_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var missing, stale []string
	for n := range exposed {
		if !documented[n] {
			missing = append(missing, n)
		}
	}
	for n := range documented {
		if !exposed[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("exposed but not in docs/metrics.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("in docs/metrics.md but not exposed: %v", stale)
	}
	if len(exposed) < 10 {
		t.Errorf("only %d tollgate_* metrics exposed", len(exposed))
	}
}

// The Grafana dashboard uses only documented metrics.
func TestGrafanaDashboardUsesDocumentedMetrics(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	board, err := os.ReadFile("../docs/grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(board, &v); err != nil {
		t.Fatalf("grafana JSON: %v", err)
	}
	used := regexp.MustCompile(`tollgate_[a-z_]+`).FindAllString(string(board), -1)
	if len(used) < 5 {
		t.Fatalf("the dashboard uses only %d metrics", len(used))
	}
	for _, m := range used {
		if !strings.Contains(string(doc), "`"+m+"`") {
			t.Errorf("the Grafana dashboard uses %s, which docs/metrics.md does not list", m)
		}
	}
}
