package quota

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func at(offsetMs int64) time.Time { return time.UnixMilli(t0 + offsetMs) }

// mutationEngine returns an engine whose (ANONYMOUS, test-client) has a
// controller_mutation_rate of q with N=10, W=1 s, as in Kafka's tests.
func mutationEngine(t *testing.T, q float64) *Engine {
	t.Helper()
	e, err := NewEngine(EngineConfig{ControllerWindowNum: 10, ControllerWindowSize: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var qs model.Quotas
	if err := qs.Set(model.UserClientEntity(model.Exact("ANONYMOUS"), model.Exact("test-client")), model.ControllerMutationRate, q); err != nil {
		t.Fatal(err)
	}
	e.SetQuotas(qs)
	return e
}

// TV4 StrictControllerMutationQuotaTest and TV5
// PermissiveControllerMutationQuotaTest: Q=10, N=10, W=1 s, burst 100; one
// request records 90 three times, then its throttle is read 5 s later.
func TestMutationTV4TV5StrictPermissive(t *testing.T) {
	type step struct {
		accepted bool
		throttle time.Duration // read right after the record
	}
	cases := []struct {
		name      string
		strict    bool
		steps     []step
		exceeded  bool
		afterFive time.Duration
	}{
		{"strict", true, []step{
			{true, 0},                // 10 tokens left
			{true, 0},                // tokens were ≥ 0 before: accepted, now −80
			{false, 8 * time.Second}, // rejected, nothing recorded
		}, true, 3 * time.Second},
		{"permissive", false, []step{
			{true, 0},
			{true, 8 * time.Second},
			{true, 17 * time.Second},
		}, false, 12 * time.Second},
	}
	for _, c := range cases {
		e := mutationEngine(t, 10)
		m := e.Client("ANONYMOUS", "test-client").Mutation(c.strict, at(0))
		for i, s := range c.steps {
			ok := m.Record(90, at(0))
			if ok != s.accepted || m.Throttle(at(0)) != s.throttle {
				t.Errorf("%s record %d: accepted %v throttle %v, want %v %v", c.name, i+1, ok, m.Throttle(at(0)), s.accepted, s.throttle)
			}
		}
		if m.Exceeded() != c.exceeded {
			t.Errorf("%s: Exceeded() = %v", c.name, m.Exceeded())
		}
		if got := m.Throttle(at(5000)); got != c.afterFive {
			t.Errorf("%s: throttle 5 s later = %v, want %v", c.name, got, c.afterFive)
		}
		// Strict rejected the third record: tokens stay at −80 (−30 after 5 s).
		wantTokens := -80.0
		if !c.strict {
			wantTokens = -170
		}
		if u := e.Usage(at(0)); len(u) != 1 || u[0].Tokens != wantTokens {
			t.Errorf("%s: usage %+v, want tokens %v", c.name, u, wantTokens)
		}
	}
}

// TV6 ControllerMutationQuotaManagerTest.testControllerMutationQuotaViolation:
// manager-level strict checks, one call per request.
func TestMutationTV6ManagerViolation(t *testing.T) {
	e := mutationEngine(t, 10)
	steps := []struct {
		at       int64
		n        float64
		throttle time.Duration
		exceeded bool
	}{
		{0, 10, 0, false}, {1000, 10, 0, false}, {2000, 10, 0, false}, {3000, 10, 0, false},
		{4000, 10, 0, false}, {5000, 10, 0, false}, {6000, 10, 0, false}, {7000, 10, 0, false},
		{8000, 10, 0, false}, {9000, 10, 0, false},
		{10000, 110, 0, false},          // bucket at 100: accepted, now −10
		{10000, 110, time.Second, true}, // rejected, nothing recorded
		{11000, 110, 0, false},          // refilled to 0: accepted
	}
	for i, s := range steps {
		if d, ex := e.Client("ANONYMOUS", "test-client").CheckMutation(at(s.at)); ex != s.exceeded || d != s.throttle {
			t.Errorf("step %d: CheckMutation = %v %v, want %v %v", i, d, ex, s.throttle, s.exceeded)
		}
		d, ex := e.Client("ANONYMOUS", "test-client").RecordMutation(s.n, true, at(s.at))
		if d != s.throttle || ex != s.exceeded {
			t.Errorf("step %d: RecordMutation = %v %v, want %v %v", i, d, ex, s.throttle, s.exceeded)
		}
	}
}

// Clients without a controller_mutation_rate quota are unbounded, and so is
// everyone while no entity has the key.
func TestMutationUnbounded(t *testing.T) {
	e := mutationEngine(t, 10)
	for _, c := range []struct{ user, client string }{{"ANONYMOUS", "other"}, {"bob", "test-client"}} {
		for i := 0; i < 3; i++ {
			if d, ex := e.Client(c.user, c.client).RecordMutation(1e6, true, at(0)); d != 0 || ex {
				t.Errorf("%v: RecordMutation = %v %v", c, d, ex)
			}
		}
	}
	empty, _ := NewEngine(EngineConfig{})
	var m Mutation
	for _, mu := range []Mutation{m, empty.Client("a", "b").Mutation(true, at(0))} {
		if !mu.Record(1e9, at(0)) || mu.Throttle(at(0)) != 0 || mu.Exceeded() {
			t.Errorf("unbounded mutation throttled")
		}
	}
}

// A quota value change keeps the tokens; the burst follows the new value.
func TestMutationQuotaChangeKeepsTokens(t *testing.T) {
	e := mutationEngine(t, 10)
	if _, ex := e.Client("ANONYMOUS", "test-client").RecordMutation(150, true, at(0)); ex {
		t.Fatal("first mutation rejected")
	}
	var qs model.Quotas
	_ = qs.Set(model.UserClientEntity(model.Exact("ANONYMOUS"), model.Exact("test-client")), model.ControllerMutationRate, 5)
	e.SetQuotas(qs)
	// −50 tokens at a refill of 5/s: 10 s of throttle.
	if d, ex := e.Client("ANONYMOUS", "test-client").CheckMutation(at(0)); !ex || d != 10*time.Second {
		t.Errorf("CheckMutation = %v %v, want 10s true", d, ex)
	}
}

// producer_ids_rate is a counted key on the controller window's token
// bucket: Q=1 id/s, N=10, W=1 s gives a burst of 10 ids; the 11th drives
// the bucket to −1 and is throttled a second, and a new id is then held
// until the deficit is paid off. Another client-id is not.
func TestProducerIDsRate(t *testing.T) {
	e, err := NewEngine(EngineConfig{ControllerWindowNum: 10, ControllerWindowSize: time.Second, MaxThrottle: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var qs model.Quotas
	if err := qs.Set(model.UserClientEntity(model.Exact("ANONYMOUS"), model.Default()), model.ProducerIDsRate, 1); err != nil {
		t.Fatal(err)
	}
	e.SetQuotas(qs)
	cl := e.Client("ANONYMOUS", "per-message")
	for i := range 10 {
		if h := cl.HoldProducerID(at(0)); h != 0 {
			t.Fatalf("id %d held %v within the burst", i+1, h)
		}
		if th := cl.RecordProducerID(at(0)); th != 0 {
			t.Fatalf("id %d throttled %v within the burst", i+1, th)
		}
	}
	if th := cl.RecordProducerID(at(0)); th != time.Second {
		t.Fatalf("the 11th id throttled %v, want 1s", th)
	}
	if h := cl.HoldProducerID(at(0)); h != time.Second {
		t.Fatalf("the 12th held %v, want 1s", h)
	}
	if h := cl.HoldProducerID(at(1000)); h != 0 {
		t.Fatalf("held %v once the deficit is paid off", h)
	}
	if h := e.Client("ANONYMOUS", "well-behaved").HoldProducerID(at(0)); h != 0 {
		t.Fatalf("another client-id held %v", h)
	}
}
