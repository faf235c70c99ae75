package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The config scripts/kafka-dev.sh prints for a newcomer is one Tollgate
// loads as it is and that fronts the real cluster: each of its three
// upstream blocks (PLAINTEXT, and the SSL and SASL_PLAINTEXT ones in its
// comments) validates, and a client produces and consumes through a
// gateway started from it. The kfake row checks that the plain config
// needs nothing but its listener (no upstream: the embedded cluster).
func TestKafkaDevConfig(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		text := "listeners:\n  - name: PLAINTEXT\n    bootstrap: 127.0.0.1:9092\n"
		if up.Real() {
			text = up.Kafka.TollgateConfig()
		}
		variants := []string{text}
		for _, l := range strings.Split(text, "\n") {
			if alt, ok := strings.CutPrefix(l, "#   upstream: "); ok {
				variants = append(variants, strings.Replace(text, "upstream:\n  bootstrap:", "upstream: "+alt+"\nunused_bootstrap:", 1))
			}
		}
		if up.Real() && len(variants) != 3 {
			t.Fatalf("the printed config shows %d upstream blocks, want PLAINTEXT, SSL and SASL_PLAINTEXT:\n%s", len(variants), text)
		}
		for i, v := range variants {
			// The commented alternatives replace the upstream block whole.
			v = cutUnused(v)
			p := filepath.Join(t.TempDir(), "tollgate.yaml")
			if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := app.Load(p)
			if err != nil {
				t.Fatalf("variant %d does not load: %v\n%s", i, err, v)
			}
			env := up.Start(t, app.Options{}, func(c *app.Config) {
				c.Upstream = cfg.Upstream
				c.Upstream.MetadataRefresh = 200 * time.Millisecond
			})
			ctx := ctxT(t, 60*time.Second)
			topic := up.Topic(t, "kafkadev")
			cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
				t.Fatalf("variant %d: produce through the gateway: %v\n%s", i, err, v)
			}
		}
	})
}

// cutUnused drops the PLAINTEXT bootstrap line a variant replaced.
func cutUnused(v string) string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if !strings.HasPrefix(l, "unused_bootstrap:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
