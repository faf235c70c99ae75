package enforce

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/wire"
)

// Topics answers what the mutation quota must know of the cluster.
type Topics interface {
	TopicPartitions(ctx context.Context, topics []string) (map[string]int32, error)
	DefaultPartitions(ctx context.Context) int32
}

// Policy is the quota policy of one gateway.
type Policy struct {
	Engine *quota.Engine
	// Topics is set once the gateway exists (it is the gateway).
	Topics Topics
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// New returns a policy enforcing eng's quotas.
func New(eng *quota.Engine, log *slog.Logger) *Policy {
	if log == nil {
		log = slog.Default()
	}
	return &Policy{Engine: eng, Now: time.Now, Log: log}
}

var _ proxy.Policy = (*Policy)(nil)

// Request implements proxy.Policy.
func (p *Policy) Request(c *principal.ConnInfo, r *proxy.Request) proxy.Verdict {
	switch r.Key {
	case wire.KeyProduce:
		if r.Acks == 0 {
			// No response will carry a throttle: record now and mute.
			hold := p.Engine.Hold(quota.ProducerByteRate, c.Principal.Name, r.ClientID, p.Now())
			return proxy.Verdict{Hold: hold, Throttle: p.Engine.RecordProduce(c.Principal.Name, r.ClientID, r.Size, p.Now().Add(hold))}
		}
		hold, reserved := p.Engine.HoldProduce(c.Principal.Name, r.ClientID, r.Size, p.Now())
		r.Reserved = reserved
		return proxy.Verdict{Hold: hold}
	case wire.KeyFetch:
		hold := p.Engine.Hold(quota.ConsumerByteRate, c.Principal.Name, r.ClientID, p.Now())
		req, ok := wire.FetchMaxBytes(r.Payload, r.BodyOffset, r.Version)
		if !ok {
			return proxy.Verdict{Hold: hold}
		}
		clamp, reserved := p.Engine.ReserveFetch(c.Principal.Name, r.ClientID, req, p.Now().Add(hold))
		if clamp < req {
			wire.ClampFetch(r.Payload, r.BodyOffset, r.Version, clamp)
		}
		r.Reserved = reserved
		return proxy.Verdict{Hold: hold}
	case wire.KeyCreateTopics, wire.KeyCreatePartitions, wire.KeyDeleteTopics:
		return p.mutation(c, r)
	}
	return proxy.Verdict{}
}

// Response implements proxy.Policy.
func (p *Policy) Response(c *principal.ConnInfo, r *proxy.Request, size int) time.Duration {
	switch r.Key {
	case wire.KeyProduce:
		now := p.Now()
		p.Engine.ReleaseProduce(c.Principal.Name, r.ClientID, r.Reserved, now)
		return p.Engine.RecordProduce(c.Principal.Name, r.ClientID, r.Size, now)
	case wire.KeyFetch:
		now := p.Now()
		p.Engine.ReleaseFetch(c.Principal.Name, r.ClientID, r.Reserved, now)
		return p.Engine.RecordFetch(c.Principal.Name, r.ClientID, size, now)
	}
	return 0
}

// Dropped implements proxy.Dropper: a fetch whose connection closed gives
// its reservation back.
func (p *Policy) Dropped(c *principal.ConnInfo, r *proxy.Request) {
	switch r.Key {
	case wire.KeyFetch:
		p.Engine.ReleaseFetch(c.Principal.Name, r.ClientID, r.Reserved, p.Now())
	case wire.KeyProduce:
		p.Engine.ReleaseProduce(c.Principal.Name, r.ClientID, r.Reserved, p.Now())
	}
}

// ErrThrottlingQuotaExceeded is THROTTLING_QUOTA_EXCEEDED.
const ErrThrottlingQuotaExceeded = 89

const throttledMessage = "The throttling quota has been exceeded."

// strictFrom is the first version of each mutation API that uses strict
// mode (KIP-599): clients from those versions understand error 89.
func strictFrom(key int16) int16 {
	switch key {
	case wire.KeyCreateTopics:
		return 6
	case wire.KeyDeleteTopics:
		return 5
	default: // CreatePartitions
		return 3
	}
}
