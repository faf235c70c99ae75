package quota

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// TV9 through long-lived Client handles: each cached bucket must follow the
// quota changes exactly as the per-call lookups do.
func TestClientTV9Precedence(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	q := quotasOf(t, model.ProducerByteRate, tv9Initial...)
	e.SetQuotas(q)
	clients := map[[2]string]*Client{}
	for i, s := range tv9Steps {
		if s.set != nil || s.remove != nil {
			applyStep(t, &q, s)
			e.SetQuotas(q)
		}
		c := clients[[2]string{s.user, s.client}]
		if c == nil {
			c = e.Client(s.user, s.client)
			clients[[2]string{s.user, s.client}] = c
		}
		if got := c.RecordProduce(s.value*11, at(0)); got != ms(s.throttleMs) {
			t.Errorf("step %d %s/%s: throttle %v, want %v ms", i+1, s.user, s.client, got, s.throttleMs)
		}
	}
}

// A handle whose bucket expired gets a fresh one; one whose key gets
// disabled stops recording.
func TestClientExpiryAndDisable(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 1000}))
	c := e.Client("u", "c")
	if d := c.RecordFetch(20000, at(0)); d != 10*time.Second {
		t.Fatalf("throttle %v", d)
	}
	hour := time.Hour.Milliseconds()
	if n := e.Expire(at(hour)); n != 1 {
		t.Fatalf("expired %d", n)
	}
	if d := c.RecordFetch(0, at(hour)); d != 0 {
		t.Errorf("expired history still throttles: %v", d)
	}
	if u := e.Usage(at(hour)); len(u) != 1 || u[0].Created != at(hour) {
		t.Errorf("usage %+v", u)
	}
	if got := c.FetchMaxBytes(at(hour)); got != 10000 {
		t.Errorf("FetchMaxBytes %d", got)
	}
	e.SetQuotas(model.Quotas{})
	if d := c.RecordFetch(1e9, at(hour)); d != 0 {
		t.Errorf("disabled key throttled %v", d)
	}
	if got := c.FetchMaxBytes(at(hour)); got != 1<<31-1 {
		t.Errorf("FetchMaxBytes disabled %d", got)
	}
	if c.User() != "u" || c.ClientID() != "c" {
		t.Error("names")
	}
}

// Client handles and per-call lookups share buckets.
func TestClientSharesBuckets(t *testing.T) {
	e := mutationEngine(t, 10)
	c := e.Client("ANONYMOUS", "test-client")
	if d, ex := c.RecordMutation(110, true, at(0)); d != 0 || ex {
		t.Fatalf("first: %v %v", d, ex)
	}
	if d, ex := e.Client("ANONYMOUS", "test-client").CheckMutation(at(0)); d != time.Second || !ex {
		t.Errorf("CheckMutation %v %v", d, ex)
	}
	if d, ex := c.CheckMutation(at(0)); d != time.Second || !ex {
		t.Errorf("Client.CheckMutation %v %v", d, ex)
	}
}

// A handle idle past the expiry charges mutations to a live bucket.
func TestClientMutationAfterExpiry(t *testing.T) {
	e := mutationEngine(t, 10)
	c := e.Client("ANONYMOUS", "test-client")
	c.RecordMutation(1, true, at(0))
	hour := time.Hour.Milliseconds()
	e.Expire(at(hour))
	m := c.Mutation(true, at(hour))
	m.Record(150, at(hour))
	if d, ex := e.Client("ANONYMOUS", "test-client").CheckMutation(at(hour)); !ex || d != 5*time.Second {
		t.Errorf("charge lost: %v %v", d, ex)
	}
}
