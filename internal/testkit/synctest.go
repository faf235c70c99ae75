package testkit

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
)

// bubbleEpoch is where a synctest bubble's fake clock starts
// (2000-01-01 UTC); a clock before bubbleLimit is taken as proof of being
// in a bubble.
var bubbleLimit = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// StartInBubble is Start for tests inside synctest.Test: the embedded
// 3-broker cluster, the gateway and the clients all run in the caller's
// bubble over one in-memory Network (env.Net), so the bubble's fake clock
// drives every timer (throttles, timeouts, metadata refresh, group
// sessions) and time advances only when everything is idle. Clients must
// dial with env.Net.DialContext (kgo.Dialer(env.Net.DialContext)).
//
// The admin HTTP port is off (it would need a real socket). The app is
// stopped by a t.Cleanup, which synctest runs inside the bubble before
// Test returns; register clients' Close after this call so they close
// first. opts.DevClusterOpts and opts.ProxyOpts are kept and applied after
// the network options.
func StartInBubble(t *testing.T, opts app.Options, edit ...func(*app.Config)) *Env {
	skipIfRealOnly(t)
	t.Helper()
	return StartInBubbleOn(t, &Network{}, opts, edit...)
}

// StartInBubbleOn is StartInBubble on a Network the caller made (in the
// bubble), so that it can build on it before the gateway starts: a
// FaultDialer over it between the gateway and the brokers
// (FaultDialer{Dial: nw.DialContext}, opts.UpstreamDial), say.
func StartInBubbleOn(t *testing.T, nw *Network, opts app.Options, edit ...func(*app.Config)) *Env {
	skipIfRealOnly(t)
	t.Helper()
	if time.Now().After(bubbleLimit) {
		t.Fatalf("testkit.StartInBubble must be called inside synctest.Test (the clock reads %v, not a bubble's)", time.Now())
	}
	cfg := config(t, edit)
	cfg.HTTP.Address = "" // no real sockets in a bubble
	opts.DevClusterOpts = append([]kfake.Opt{kfake.ListenFn(nw.Listen)}, opts.DevClusterOpts...)
	opts.ProxyOpts = append([]proxy.Option{proxy.WithListenFunc(nw.Listen), proxy.WithDialFunc(nw.DialContext)}, opts.ProxyOpts...)
	return start(t, cfg, opts, nw)
}
