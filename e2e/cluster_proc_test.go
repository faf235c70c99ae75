package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/devcluster"
)

// TestClusterInstanceKill9: three `tollgate serve` processes of one
// Tollgate cluster; one is killed with SIGKILL mid-run (no last report).
// The other two drop it after the session timeout and keep serving; the
// killed one, restarted on its data_dir, reads the shared state back
// (including a change made while it was down) and rejoins.
func TestClusterInstanceKill9(t *testing.T) {
	t.Parallel()
	bin := buildTollgate(t, t.TempDir())
	up, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ctx := ctxT(t, 90*time.Second)
	defer http.DefaultClient.CloseIdleConnections()

	base := freePorts(t, 15) // per instance: bootstrap, admin, brokers 0-2
	type inst struct {
		cfg, boot, admin string
		proc             *gatewayProc
	}
	var insts []*inst
	for i := range 3 {
		p := base + 5*i
		dir := t.TempDir()
		in := &inst{cfg: filepath.Join(dir, "tollgate.yaml"), boot: loopback(p), admin: "http://" + loopback(p+1)}
		yaml := gatewayYAML(filepath.Join(dir, "data"), p, up.Addrs(), "", fmt.Sprintf(`authorization:
  quota_admins: [ANONYMOUS]
  allow_anonymous_describe: true
cluster:
  id: kill9
  instance_id: i%d
  exchange_interval: 250ms
`, i))
		if err := os.WriteFile(in.cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		in.proc = serveBinary(t, bin, in.cfg)
		insts = append(insts, in)
	}
	live := func(in *inst) int {
		resp, err := http.Get(in.admin + "/api/v1/cluster")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var st struct {
			Live int `json:"live"`
		}
		json.NewDecoder(resp.Body).Decode(&st)
		return st.Live
	}
	waitUntil(t, "three instances", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 3 && live(insts[1]) == 3 && live(insts[2]) == 3
	})

	// kill -9 the third.
	killed := time.Now()
	insts[2].proc.kill9(t, insts[2].boot)
	waitUntil(t, "the others drop the killed instance", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 2 && live(insts[1]) == 2
	})
	t.Logf("dropped %v after the kill (session timeout 4 × 250 ms)", time.Since(killed))

	// The survivors serve and change the shared state meanwhile.
	adm := kadm.NewClient(newRestartClient(t, insts[1].boot))
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("while-down")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4242}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter through a survivor: %v %+v", err, res)
	}

	// Restarted on its data_dir, it reads the change and rejoins.
	insts[2].proc = serveBinary(t, bin, insts[2].cfg)
	waitUntil(t, "three instances again", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 3 && live(insts[2]) == 3
	})
	qs, err := kadm.NewClient(newRestartClient(t, insts[2].boot)).DescribeClientQuotas(ctx, true,
		[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("while-down"), MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(qs) != 1 || qs[0].Values[0].Value != 4242 {
		t.Fatalf("the restarted instance describes %+v (%v), want the change made while it was down", qs, err)
	}
	// A's metrics counted the leave by timeout and the rejoin.
	resp, err := http.Get(insts[0].admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, want := range []string{`tollgate_cluster_membership_events_total{event="leave",reason="timeout"} 1`, `tollgate_cluster_instances 3`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("A's /metrics lacks %q", want)
		}
	}
}
