package e2e

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/wire"
)

// A newer broker's ApiVersions, through the gateway: asked of the broker
// directly and through Tollgate, the gateway's answer is the broker's
// clamped to what kmsg can parse — every key the broker advertises that
// kmsg knows is there, with the broker's min and min(broker max, kmsg
// max); keys kmsg does not know are gone; the only additions are the APIs
// Tollgate answers itself (telemetry), with kmsg's ranges. Against Kafka
// 4.x this is where a newer broker's APIs meet an older kmsg.
func TestApiVersionsClampedFromBroker(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		req := func() *kmsg.ApiVersionsRequest {
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 3
			r.ClientSoftwareName, r.ClientSoftwareVersion = "tollgate-e2e", "1"
			return r
		}
		direct := dialRaw(t, env.UpstreamAddrs()[0]).do(t, req()).(*kmsg.ApiVersionsResponse)
		through := dialRaw(t, env.Bootstrap).do(t, req()).(*kmsg.ApiVersionsResponse)
		if direct.ErrorCode != 0 || through.ErrorCode != 0 {
			t.Fatalf("ApiVersions errors: direct %d, through %d", direct.ErrorCode, through.ErrorCode)
		}
		got := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range through.ApiKeys {
			got[k.ApiKey] = k
		}
		ownAnswers := map[int16]bool{int16(kmsg.GetTelemetrySubscriptions): true, int16(kmsg.PushTelemetry): true}
		unknown := 0
		for _, d := range direct.ApiKeys {
			a := wire.Lookup(d.ApiKey)
			g, ok := got[d.ApiKey]
			delete(got, d.ApiKey)
			switch {
			case ownAnswers[d.ApiKey]:
			case !a.Known:
				unknown++
				if ok {
					t.Errorf("key %d (unknown to kmsg) advertised through the gateway: %+v", d.ApiKey, g)
				}
			case d.MinVersion > a.Max:
				if ok {
					t.Errorf("%s: broker's min %d is above kmsg's max %d, yet advertised: %+v", kmsg.NameForKey(d.ApiKey), d.MinVersion, a.Max, g)
				}
			case !ok:
				t.Errorf("%s (broker %d–%d, kmsg max %d) missing through the gateway", kmsg.NameForKey(d.ApiKey), d.MinVersion, d.MaxVersion, a.Max)
			case g.MinVersion != d.MinVersion || g.MaxVersion != min(d.MaxVersion, a.Max):
				t.Errorf("%s: through %d–%d, want %d–%d (broker %d–%d, kmsg max %d)", kmsg.NameForKey(d.ApiKey),
					g.MinVersion, g.MaxVersion, d.MinVersion, min(d.MaxVersion, a.Max), d.MinVersion, d.MaxVersion, a.Max)
			}
		}
		for k, g := range got {
			if !ownAnswers[k] {
				t.Errorf("%s advertised through the gateway but not by the broker: %+v", kmsg.NameForKey(k), g)
			}
		}
		t.Logf("%s: %d keys advertised, %d unknown to kmsg dropped, %d through the gateway", up.Name, len(direct.ApiKeys), unknown, len(through.ApiKeys))
	})
}
