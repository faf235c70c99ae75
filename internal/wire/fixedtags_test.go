package wire

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type hostMapper struct{ host string }

func (m hostMapper) Advertise(id int32, _ string, _ int32) (string, int32, bool) {
	return m.host, 9100 + id, true
}

func TestRewriteFetchTagsSameLength(t *testing.T) {
	for _, tc := range []struct {
		name, upstream, gateway string
		keep                    bool // the rewritten endpoints fit
	}{
		{"shorter", "broker-0.kafka.internal.example.com", "gw.example", true},
		{"equal", "10.0.0.1", "10.9.9.9", true},
		{"longer", "b0", "a-very-long-gateway-host-name.example.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for v := int16(12); v <= Lookup(int16(kmsg.Fetch)).Max; v++ {
				resp := kmsg.NewPtrFetchResponse()
				resp.SetVersion(v)
				resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: tc.upstream, Port: 9092}}
				full := resp.AppendTo(nil)
				tags := full[11:] // after throttle, error, session id and the empty topic array
				out, err := RewriteFetchTagsSameLength(append([]byte(nil), tags...), v, hostMapper{tc.gateway})
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(tags) {
					t.Fatalf("v%d: length %d, want %d", v, len(out), len(tags))
				}
				if strings.Contains(string(out), tc.upstream) {
					t.Fatalf("v%d: upstream host left in %q", v, out)
				}
				got := kmsg.NewPtrFetchResponse()
				got.SetVersion(v)
				if err := got.ReadFrom(append(append([]byte(nil), full[:11]...), out...)); err != nil {
					t.Fatalf("v%d: rewritten section does not decode: %v", v, err)
				}
				if tc.keep {
					if len(got.Brokers) != 1 || got.Brokers[0].Host != tc.gateway || got.Brokers[0].Port != 9101 {
						t.Fatalf("v%d: brokers %+v", v, got.Brokers)
					}
				} else if len(got.Brokers) != 0 {
					t.Fatalf("v%d: endpoints that do not fit must be dropped, got %+v", v, got.Brokers)
				}
			}
		})
	}
	if out, err := RewriteFetchTagsSameLength([]byte{0}, 16, hostMapper{"x"}); err != nil || len(out) != 1 || out[0] != 0 {
		t.Fatalf("empty section: %v %v", out, err)
	}
}
