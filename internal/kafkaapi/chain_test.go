package kafkaapi

import (
	"bufio"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/wire"
)

// fullDeps sets every part of Deps, with a real control plane and a quota
// filter.
func fullDeps(t *testing.T) Deps {
	t.Helper()
	cp := newControlPlane(t)
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	qf, err := enforce.New(enforce.Config{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	return Deps{
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientQuotas:  cp.quotas,
		Credentials:   cp.creds,
		BrokerConfigs: cp.brokers,
		Quota:         qf,
		Reserved:      []string{"tollgate-audit", "tollgate-usage"},
		Telemetry:     telemetry.New(telemetry.Config{}.Options()),
	}
}

// keysOf lists the API keys a filter sees.
func keysOf(f proxy.Filter) []int16 {
	if ks := f.Keys(); ks != nil {
		return ks
	}
	var all []int16
	for k := int16(0); k <= wire.MaxKey; k++ {
		all = append(all, k)
	}
	return all
}

// apiHeader is the first comment line of an API file: "// Name (key N),
// vA–vB." or "// Name (key N), vA." (a single version).
var apiHeader = regexp.MustCompile(`^// (\w+) \(key (\d+)\), v(\d+)(?:–v(\d+))?[ .]`)

type apiFile struct {
	path        string
	name        string
	key         int16
	first, last int16
}

// apiFiles reads the header of every NN_*.go file of the package.
func apiFiles(t *testing.T) map[int16]apiFile {
	t.Helper()
	paths, err := filepath.Glob("[0-9][0-9]_*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int16]apiFile{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var first string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "//") {
				first = sc.Text()
				break
			}
		}
		f.Close()
		m := apiHeader.FindStringSubmatch(first)
		if m == nil {
			t.Errorf("%s: the first comment line %q is not a header like \"// DescribeConfigs (key 32), v0–v4.\"", p, first)
			continue
		}
		key, _ := strconv.Atoi(m[2])
		lo, _ := strconv.Atoi(m[3])
		hi := lo
		if m[4] != "" {
			hi, _ = strconv.Atoi(m[4])
		}
		af := apiFile{path: p, name: m[1], key: int16(key), first: int16(lo), last: int16(hi)}
		if prefix, _ := strconv.Atoi(p[:2]); prefix != key {
			t.Errorf("%s: the header names key %d", p, key)
		}
		if prev, dup := out[af.key]; dup {
			t.Errorf("key %d has two files: %s and %s", key, prev.path, p)
		}
		out[af.key] = af
	}
	return out
}

// Every API a filter of the chain sees (and the two SASL APIs, which the
// session's SASL gate handles) has its file, whose header names it as kmsg
// does and gives kmsg's versions, so the headers cannot drift from the
// franz-go version the gateway is built with. Every file's header is
// checked, not only those of the chain's keys.
func TestEveryAPIHasItsFile(t *testing.T) {
	files := apiFiles(t)
	for _, af := range files {
		kr := kmsg.RequestForKey(af.key)
		if kr == nil {
			t.Errorf("%s: key %d is not a key kmsg knows", af.path, af.key)
			continue
		}
		if want := kmsg.NameForKey(af.key); af.name != want {
			t.Errorf("%s: the header names %q, kmsg names key %d %q", af.path, af.name, af.key, want)
		}
		if af.first != 0 || af.last != kr.MaxVersion() {
			t.Errorf("%s: the header says v%d–v%d, kmsg knows v0–v%d", af.path, af.first, af.last, kr.MaxVersion())
		}
		base := strings.TrimSuffix(filepath.Base(af.path)[3:], ".go")
		if strings.ReplaceAll(base, "_", "") != strings.ToLower(kmsg.NameForKey(af.key)) {
			t.Errorf("%s: the file name does not spell %s", af.path, kmsg.NameForKey(af.key))
		}
	}

	seen := map[int16][]string{
		int16(kmsg.SASLHandshake):    {"the SASL gate"},
		int16(kmsg.SASLAuthenticate): {"the SASL gate"},
	}
	for _, f := range Chain(fullDeps(t)) {
		keys := keysOf(f)
		if q, ok := f.(*enforce.Filter); ok {
			// request_percentage times every API alike; only what the
			// quota filter reads by content has a file.
			keys = q.ByContent()
		}
		for _, k := range keys {
			seen[k] = append(seen[k], f.Name())
		}
	}
	for k, by := range seen {
		if _, ok := files[k]; !ok {
			t.Errorf("%s (key %d), seen by %s, has no file %02d_*.go", kmsg.NameForKey(k), k, strings.Join(by, ", "), k)
		}
	}
}

// Every API whose responses can name a broker is seen by the address
// filter, and it sees no other.
func TestAddressFilterCoversCarriesAddresses(t *testing.T) {
	var addr proxy.Filter
	for _, f := range Chain(fullDeps(t)) {
		if _, ok := f.(addresses); ok {
			addr = f
		}
	}
	if addr == nil {
		t.Fatal("the chain has no address filter")
	}
	keys := keysOf(addr)
	for k := int16(0); k <= wire.MaxKey; k++ {
		if wire.CarriesAddresses(k) != slices.Contains(keys, k) {
			t.Errorf("%s (key %d): wire.CarriesAddresses = %v, seen by %s = %v",
				kmsg.NameForKey(k), k, wire.CarriesAddresses(k), addr.Name(), slices.Contains(keys, k))
		}
	}
}

func filterNames(c proxy.Chain) []string {
	var out []string
	for _, f := range c {
		out = append(out, f.Name())
	}
	return out
}

// The chain's order: ApiVersions first (nearest the client, it sees every
// ApiVersions answer last), the quota filter last (nearest the broker, it
// charges only what is forwarded), the control-plane filters only when
// their part of the control plane is there.
func TestChainOrder(t *testing.T) {
	full := fullDeps(t)
	for _, tc := range []struct {
		name string
		deps Deps
		want []string
	}{
		{"nothing", Deps{}, []string{"api-versions", "broker-addresses", "group-members", "broker-configs"}},
		{"client quotas", Deps{ClientQuotas: full.ClientQuotas},
			[]string{"api-versions", "broker-addresses", "group-members", "broker-configs", "client-quotas"}},
		{"credentials", Deps{Credentials: full.Credentials},
			[]string{"api-versions", "broker-addresses", "group-members", "broker-configs", "scram-credentials"}},
		{"quota filter", Deps{Quota: full.Quota},
			[]string{"api-versions", "broker-addresses", "group-members", "quota", "broker-configs"}},
		{"reserved topics", Deps{Reserved: []string{"tollgate-audit"}},
			[]string{"api-versions", "broker-addresses", "group-members", "broker-configs", "reserved-topics"}},
		{"no reserved topic named", Deps{Reserved: []string{""}},
			[]string{"api-versions", "broker-addresses", "group-members", "broker-configs"}},
		{"telemetry", Deps{Telemetry: full.Telemetry},
			[]string{"api-versions", "broker-addresses", "group-members", "broker-configs", "telemetry"}},
		{"everything", full,
			[]string{"api-versions", "broker-addresses", "group-members", "quota", "broker-configs", "client-quotas", "scram-credentials", "telemetry", "reserved-topics"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Chain(tc.deps)
			if got := filterNames(c); !slices.Equal(got, tc.want) {
				t.Errorf("chain %v, want %v", got, tc.want)
			}
			for _, f := range c {
				if bc, ok := f.(*brokerConfigs); ok && (bc.owner == nil) != (tc.deps.BrokerConfigs == nil) {
					t.Errorf("broker-configs answers from %v, want %v", bc.owner, tc.deps.BrokerConfigs)
				}
			}
			// The gateway accepts the chain: every filter has a hook,
			// every key is one kmsg knows.
			_, err := proxy.New(proxy.Config{
				Listeners: []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
				Upstream:  []string{"127.0.0.1:1"},
			}, proxy.WithChain(c))
			if err != nil {
				t.Errorf("the gateway refuses the chain: %v", err)
			}
		})
	}
}
