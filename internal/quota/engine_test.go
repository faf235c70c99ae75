package quota

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// t0 is an arbitrary, unaligned wall-clock-like start: Kafka's MockTime
// starts at the current time, which is not aligned to windows either.
const t0 int64 = 1_700_000_000_123

// sensorStep is one record: at t0+at, record value, and expect the throttle
// in ms (0: not throttled).
type sensorStep struct {
	at       int64
	value    float64
	throttle int32
}

func newTestEngine(t testing.TB, cfg EngineConfig) *Engine {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEngineConfigDefaults(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	want := EngineConfig{
		WindowNum: 11, WindowSize: time.Second, MaxThrottle: 30 * time.Second,
		ControllerWindowNum: 11, ControllerWindowSize: time.Second, Expiry: time.Hour,
		MaxBuckets: 100_000, MaxRoutes: 200_000,
	}
	if got := e.Config(); got != want {
		t.Errorf("Config = %+v, want %+v", got, want)
	}
	for _, bad := range []EngineConfig{
		{WindowNum: -1}, {WindowSize: -time.Second}, {WindowSize: 1500 * time.Microsecond},
		{ControllerWindowNum: -3}, {ControllerWindowSize: time.Microsecond}, {Expiry: -time.Hour},
		{MaxBuckets: -1}, {MaxRoutes: -5},
	} {
		if _, err := NewEngine(bad); err == nil {
			t.Errorf("NewEngine(%+v) accepted", bad)
		}
	}
}

// TV1 through the engine: default client-id quota 500 B/s.
func TestEngineTV1(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 500}))
	steps := []sensorStep{
		{0, 400, 0}, {1000, 400, 0}, {2000, 400, 0}, {3000, 400, 0}, {4000, 400, 0},
		{5000, 400, 0}, {6000, 400, 0}, {7000, 400, 0}, {8000, 400, 0}, {9000, 400, 0},
		{10500, 2300, 2100},
		{12600, 400, 1200}, {13600, 400, 1200}, {14600, 400, 1200}, {15600, 400, 1200},
		{16600, 400, 1200}, {17600, 400, 1200}, {18600, 400, 1200}, {19600, 400, 1200},
		{20600, 400, 1700}, {21600, 400, 0}, {22600, 0, 0},
	}
	for i, s := range steps {
		got := e.Client("ANONYMOUS", "unknown").RecordProduce(int(s.value), at(s.at))
		if want := ms(int64(s.throttle)); got != want {
			t.Errorf("step %d: throttle %v, want %v", i, got, want)
		}
	}
	u := e.Usage(at(22600))
	if len(u) != 1 || u[0].User != "" || u[0].ClientID != "unknown" || u[0].Level != model.LevelDefaultClient ||
		u[0].Throttles != 10 || u[0].ThrottleTotal != (2100+8*1200+1700)*time.Millisecond {
		t.Errorf("usage = %+v", u)
	}
}

// TV2 through the engine: request_percentage 1 for (ANONYMOUS, test-client),
// throttles capped at the 1 s window.
func TestEngineTV2RequestPercentage(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.RequestPercentage, entry{ent(ex("ANONYMOUS"), ex("test-client")), 1}))
	steps := []struct {
		at       int64
		thread   time.Duration
		throttle time.Duration
	}{
		{0, 4 * time.Millisecond, 0}, {9000, 36 * time.Millisecond, 0},
		{10500, 67100 * time.Microsecond, 210 * time.Millisecond},
		{21710, 500 * time.Millisecond, time.Second}, // capped; 40 000 ms uncapped
	}
	for i, s := range steps {
		if got := e.Client("ANONYMOUS", "test-client").RecordRequest(s.thread, at(s.at)); got != s.throttle {
			t.Errorf("step %d: throttle %v, want %v", i, got, s.throttle)
		}
	}
}

// TV9 through the engine: all 25 checks, quotas replaced live in between.
func TestEngineTV9Precedence(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	q := quotasOf(t, model.ProducerByteRate, tv9Initial...)
	e.SetQuotas(q)
	for i, s := range tv9Steps {
		if s.set != nil || s.remove != nil {
			applyStep(t, &q, s)
			e.SetQuotas(q)
		}
		r := e.Resolve(model.ProducerByteRate, s.user, s.client, at(0))
		if r.Quota != s.bound || r.UserTag != s.userTag || r.ClientTag != s.cTag {
			t.Errorf("step %d %s/%s: bound %v tags (%q, %q), want %v (%q, %q)",
				i+1, s.user, s.client, r.Quota, r.UserTag, r.ClientTag, s.bound, s.userTag, s.cTag)
		}
		got := e.Client(s.user, s.client).RecordProduce(s.value*11, at(0))
		if got != ms(s.throttleMs) {
			t.Errorf("step %d %s/%s: throttle %v, want %v ms", i+1, s.user, s.client, got, s.throttleMs)
		}
	}
}

// TV10: the fetch clamp Q·(N−1)·W.
func TestEngineTV10FetchMaxBytes(t *testing.T) {
	cases := []struct {
		name string
		cfg  EngineConfig
		q    model.Quotas
		want int32
	}{
		{"defaults, Q=5000", EngineConfig{}, quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 5000}), 50000},
		{"N=4 W=1s, default user 10", EngineConfig{WindowNum: 4}, quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 10}), 30},
		{"no quota at all", EngineConfig{}, model.Quotas{}, math.MaxInt32},
		{"producer quota only", EngineConfig{}, quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 10}), math.MaxInt32},
		{"another user's quota", EngineConfig{}, quotasOf(t, model.ConsumerByteRate, entry{ent(ex("bob"), none), 10}), math.MaxInt32},
		{"huge quota saturates", EngineConfig{}, quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 1e12}), math.MaxInt32},
		{"fraction floors", EngineConfig{WindowNum: 2}, quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 10.9}), 10},
	}
	for _, c := range cases {
		e := newTestEngine(t, c.cfg)
		e.SetQuotas(c.q)
		if got := e.Client("alice", "consumer-1").FetchMaxBytes(at(0)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// Byte-rate throttles are capped at MaxThrottle; a negative MaxThrottle
// restores Kafka's uncapped behaviour.
func TestEngineMaxThrottle(t *testing.T) {
	q := quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000})
	_ = q.Set(ent(deflt, none), model.ConsumerByteRate, 1000)
	// 1e6 B: rate 100 000/s over 10 s, uncapped (100 000−1000)/1000 × 10 000.
	cases := []struct {
		max  time.Duration
		want time.Duration
	}{
		{0, 30 * time.Second},
		{5 * time.Second, 5 * time.Second},
		{-1, 990 * time.Second},
	}
	for _, c := range cases {
		e := newTestEngine(t, EngineConfig{MaxThrottle: c.max})
		e.SetQuotas(q)
		if got := e.Client("u", "c").RecordProduce(1e6, at(0)); got != c.want {
			t.Errorf("MaxThrottle %v: produce throttle %v, want %v", c.max, got, c.want)
		}
		if got := e.Client("u", "c").RecordFetch(1e6, at(0)); got != c.want {
			t.Errorf("MaxThrottle %v: fetch throttle %v, want %v", c.max, got, c.want)
		}
	}
}

// A value change keeps the bucket's history (a lowered quota throttles at
// once on past traffic); a change of level moves the client to a fresh
// bucket, and back again to the old one while it lives.
func TestEngineQuotaChanges(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	set := func(entries ...entry) { e.SetQuotas(quotasOf(t, model.ProducerByteRate, entries...)) }
	alice := ent(ex("alice"), none)
	aliceApp := ent(ex("alice"), ex("app"))
	steps := []struct {
		change  []entry
		bytes   int
		want    time.Duration
		comment string
	}{
		{[]entry{{alice, 4000}}, 30000, 0, "3000/s under 4000"},
		{[]entry{{alice, 2000}}, 0, 5 * time.Second, "lowered: (3000−2000)/2000 × 10 s on past traffic"},
		{[]entry{{alice, 4000}}, 0, 0, "raised again"},
		{[]entry{{alice, 4000}, {aliceApp, 2000}}, 0, 0, "new tags (alice, app): fresh bucket"},
		{[]entry{{alice, 4000}, {aliceApp, 2000}}, 25000, 2500 * time.Millisecond, "fresh bucket's own traffic"},
		{[]entry{{alice, 2000}}, 0, 5 * time.Second, "back to (alice, \"\"): its history is still there"},
	}
	for i, s := range steps {
		set(s.change...)
		if got := e.Client("alice", "app").RecordProduce(s.bytes, at(0)); got != s.want {
			t.Errorf("step %d (%s): throttle %v, want %v", i, s.comment, got, s.want)
		}
	}
	if u := e.Usage(at(0)); len(u) != 2 {
		t.Errorf("want 2 buckets, got %+v", u)
	}
}

// Buckets idle for an hour are dropped, with their history; active ones are
// kept, and the slow path sweeps by itself.
func TestEngineExpiry(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, deflt), 1000}))
	hour := time.Hour.Milliseconds()
	e.Client("idle", "c").RecordProduce(20000, at(0))
	e.Client("busy", "c").RecordProduce(20000, at(0))
	e.Client("busy", "c").RecordProduce(1, at(hour-1000))
	if n := e.Expire(at(hour - 1)); n != 0 {
		t.Errorf("expired %d buckets before an hour", n)
	}
	if u := e.Usage(at(hour)); len(u) != 1 || u[0].User != "busy" {
		t.Errorf("usage at 1 h lists idle buckets: %+v", u)
	}
	if n := e.Expire(at(hour)); n != 1 {
		t.Errorf("expired %d buckets at 1 h, want 1", n)
	}
	// The dropped bucket's throttle history is gone: a new bucket starts.
	e.Client("idle", "c").RecordProduce(0, at(hour))
	for _, u := range e.Usage(at(hour)) {
		if u.User == "idle" && (u.Throttles != 0 || u.Created != at(hour)) {
			t.Errorf("idle bucket came back with history: %+v", u)
		}
	}
	if n := len(e.mgr[model.ProducerByteRate].view.Load().routes); n != 2 {
		t.Errorf("%d cached routes, want 2", n)
	}

	// Cardinality: many one-off clients all go away by themselves once a
	// later slow-path call sweeps.
	for i := range 500 {
		e.Client(fmt.Sprintf("user-%d", i), "c").RecordProduce(1, at(2*hour))
	}
	e.Client("late", "c").RecordProduce(1, at(3*hour+30_000))
	if u := e.Usage(at(3*hour + 30_000)); len(u) != 1 || u[0].User != "late" {
		t.Errorf("after the automatic sweep: %d buckets", len(u))
	}
	m := &e.mgr[model.ProducerByteRate]
	e.mu.Lock()
	nb, nr := len(m.buckets), len(m.view.Load().routes)+len(m.dirty)
	e.mu.Unlock()
	if nb != 1 || nr > 2 {
		t.Errorf("after sweep: %d buckets, %d routes", nb, nr)
	}
}

// Resolve reports the level, entity, value, tags, rate and utilization, and
// creates nothing.
func TestEngineResolve(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(ex("alice"), none), 4000}, entry{ent(deflt, none), 1000}))
	r := e.Resolve(model.ProducerByteRate, "bob", "app", at(0))
	if r.Level != model.LevelDefaultUser || r.Quota != 1000 || r.UserTag != "bob" || r.ClientTag != "" || r.Rate != 0 {
		t.Errorf("before traffic: %+v", r)
	}
	if u := e.Usage(at(0)); len(u) != 0 {
		t.Errorf("Resolve created buckets: %+v", u)
	}
	e.Client("alice", "app").RecordProduce(20000, at(0))
	r = e.Resolve(model.ProducerByteRate, "alice", "other", at(0))
	if r.Level != model.LevelUser || r.Entity != ent(ex("alice"), none) || r.Rate != 2000 || r.Utilization != 0.5 {
		t.Errorf("alice: %+v", r)
	}
	u := e.Usage(at(0))
	if len(u) != 1 || u[0].Rate != 2000 || u[0].Utilization != 0.5 || u[0].Quota != 4000 {
		t.Errorf("usage: %+v", u)
	}
}

// A throttled fetch is un-recorded, so it does not count against later
// fetches.
func TestEngineUnrecordFetch(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 1000}))
	if d := e.Client("u", "c").RecordFetch(15000, at(0)); d != 5*time.Second {
		t.Fatalf("throttle %v", d)
	}
	e.Client("u", "c").Unrecord(model.ConsumerByteRate, 15000, at(0))
	if d := e.Client("u", "c").RecordFetch(10000, at(0)); d != 0 {
		t.Errorf("after unrecord: throttle %v", d)
	}
}

// Unlimited clients of an enabled key are still recorded, as Kafka records
// into sensors with a Long.MAX_VALUE bound, so that a quota added later for
// the same tags sees their history.
func TestEngineUnlimitedBucketsRecord(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, ex("C1")), 1000}))
	if d := e.Client("u", "C2").RecordProduce(30000, at(0)); d != 0 {
		t.Fatalf("unlimited client throttled %v", d)
	}
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, ex("C1")), 1000}, entry{ent(none, ex("C2")), 1000}))
	if d := e.Client("u", "C2").RecordProduce(0, at(0)); d != 20*time.Second {
		t.Errorf("history not kept: throttle %v", d)
	}
}

// Many goroutines record while quotas change and buckets expire; every byte
// recorded at one instant is accounted for. Run with -race.
func TestEngineConcurrent(t *testing.T) {
	e := newTestEngine(t, EngineConfig{MaxThrottle: -1})
	q := quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1e12})
	e.SetQuotas(q)
	const workers, perWorker = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				e.Client("shared", fmt.Sprintf("c%d", (w+i)%50)).RecordProduce(10, at(0))
				if i%500 == 0 {
					e.Client("shared", "c").FetchMaxBytes(at(0))
					e.Usage(at(0))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			_ = q.Set(ent(deflt, none), model.ProducerByteRate, 1e12+float64(i))
			e.SetQuotas(q)
			e.Expire(at(0))
		}
	}()
	wg.Wait()
	u := e.Usage(at(0))
	if len(u) != 1 || u[0].Rate != workers*perWorker*10/10.0 {
		t.Errorf("usage = %+v, want one bucket at %v/s", u, workers*perWorker*10/10.0)
	}
}

// The read-only route map takes over new clients after enough misses.
func TestEngineRoutePromotion(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, deflt), 1e9}))
	for i := range 100 {
		e.Client("u", fmt.Sprintf("c%d", i)).RecordProduce(1, at(0))
	}
	// A client whose route sits in the dirty map is a miss each time, so a
	// busy one gets it published quickly.
	for range 13 {
		e.Client("u", "c99").RecordProduce(1, at(0))
	}
	m := &e.mgr[model.ProducerByteRate]
	if n := len(m.view.Load().routes); n != 100 {
		t.Errorf("%d routes published, want 100 (dirty %d)", n, len(m.dirty))
	}
}

// A value-only change keeps every cached route; a change of level drops
// only the routes whose new bucket does not exist yet.
func TestEngineSetQuotasKeepsRoutes(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	for i := range 10 {
		e.Client(fmt.Sprintf("u%d", i), "c").RecordProduce(1, at(0))
	}
	routes := func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		m := &e.mgr[model.ProducerByteRate]
		return len(m.view.Load().routes) + len(m.dirty)
	}
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 2000}))
	if n := routes(); n != 10 {
		t.Errorf("value change kept %d routes, want 10", n)
	}
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, deflt), 2000}))
	if n := routes(); n != 0 {
		t.Errorf("level change kept %d routes, want 0", n)
	}
}

// Without any explicit Expire the slow path sweeps every 30 s.
func TestEngineAutomaticSweep(t *testing.T) {
	e := newTestEngine(t, EngineConfig{Expiry: time.Minute})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	for i := range 100 {
		e.Client(fmt.Sprintf("u%d", i), "c").RecordProduce(1, at(0))
	}
	e.Client("late", "c").RecordProduce(1, at(61_000))
	e.mu.Lock()
	n := len(e.mgr[model.ProducerByteRate].buckets)
	e.mu.Unlock()
	if n != 1 {
		t.Errorf("%d buckets after the sweep, want 1", n)
	}
}

// Odd names reach the engine's buckets, usage and resolution unchanged.
func TestEngineOddNames(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	user, client := "<default>", "a/b=c d:ü"
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(ex(user), ex(client)), 1000}))
	if d := e.Client(user, client).RecordProduce(20000, at(0)); d != 10*time.Second {
		t.Errorf("throttle %v", d)
	}
	if d := e.Client("someone", client).RecordProduce(20000, at(0)); d != 0 {
		t.Errorf("literal <default> acted as the default: %v", d)
	}
	r := e.Resolve(model.ProducerByteRate, user, client, at(0))
	if r.Entity.User.Value() != user || r.Entity.Client.Value() != client || r.UserTag != user || r.ClientTag != client {
		t.Errorf("resolution %+v", r)
	}
	for _, u := range e.Usage(at(0)) {
		if u.Quota == 1000 && (u.User != user || u.ClientID != client || model.Sanitize(u.User) != "%3Cdefault%3E") {
			t.Errorf("usage %+v", u)
		}
	}
}

// A gateway sees one bucket through several connections. Every response of
// a throttled bucket is held to the same deadline, so a second connection
// cannot keep sending while the first one waits.
func TestEngineSharedDeadline(t *testing.T) {
	e := newTestEngine(t, EngineConfig{SharedDeadline: true})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	// The first response takes the bucket 5 s into debt.
	if d := e.Client("u", "a").RecordProduce(15000, at(0)); d != 5*time.Second {
		t.Fatalf("first throttle %v", d)
	}
	// Another connection's tiny request 1 s later: on its own the rate is
	// still over the quota, but its own formula would give less than the
	// 4 s left; it must wait for the shared deadline.
	if d := e.Client("u", "a").RecordProduce(1, at(1000)); d < 4*time.Second {
		t.Fatalf("second connection throttled %v, want at least the 4 s left", d)
	}
	// After the deadline the bucket is not throttled for traffic within
	// the quota.
	if d := e.Client("u", "a").RecordProduce(1, at(30000)); d != 0 {
		t.Fatalf("after the deadline: %v", d)
	}
}

// Fetches in flight on several connections share the window's room: the
// second and third parallel fetch get what is left, at least 1 byte.
func TestEngineReserveFetch(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	if c, r := e.Client("u", "c").ReserveFetch(50<<20, at(0)); c != 50<<20 || r != 0 {
		t.Fatalf("no quota: clamp %d reserved %d", c, r)
	}
	e.SetQuotas(quotasOf(t, model.ConsumerByteRate, entry{ent(deflt, none), 1000}))
	c1, r1 := e.Client("u", "c").ReserveFetch(50<<20, at(0))
	if c1 != 10000 || r1 != 10000 {
		t.Fatalf("first fetch: clamp %d reserved %d, want Kafka's Q·(N−1)·W = 10000", c1, r1)
	}
	if c2, _ := e.Client("u", "c").ReserveFetch(50<<20, at(0)); c2 != 1 {
		t.Fatalf("second parallel fetch: clamp %d, want 1 (the window is reserved)", c2)
	}
	e.Client("u", "c").Release(model.ConsumerByteRate, r1, at(10))
	e.Client("u", "c").RecordFetch(4000, at(10))
	if c3, _ := e.Client("u", "c").ReserveFetch(50<<20, at(10)); c3 < 5000 || c3 > 6000 {
		t.Fatalf("after 4000 B were used: clamp %d, want the rest of the window", c3)
	}
}

// Hold tells the gateway how long a request for a throttled bucket waits,
// whichever connection it came on; without SharedDeadline it is Kafka's
// behaviour (no hold).
func TestEngineHold(t *testing.T) {
	for _, shared := range []bool{false, true} {
		e := newTestEngine(t, EngineConfig{SharedDeadline: shared})
		e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
		if d := e.Client("u", "c").Hold(model.ProducerByteRate, at(0)); d != 0 {
			t.Fatalf("hold before any traffic: %v", d)
		}
		e.Client("u", "c").RecordProduce(15000, at(0)) // 5 s of debt
		want := time.Duration(0)
		if shared {
			want = 4 * time.Second
		}
		if d := e.Client("u", "c").Hold(model.ProducerByteRate, at(1000)); d != want {
			t.Fatalf("shared=%v: hold %v, want %v", shared, d, want)
		}
		if d := e.Client("u", "c").Hold(model.ProducerByteRate, at(6000)); d != 0 {
			t.Fatalf("hold after the deadline: %v", d)
		}
		if d := e.Client("u", "c").Hold(model.ConsumerByteRate, at(1000)); d != 0 {
			t.Fatalf("another key's hold: %v", d)
		}
	}
}

// A client pipelines produce requests: those forwarded but not answered
// count toward the hold of the next one, so the pipeline cannot carry a
// window's worth more than the quota before the first throttle returns.
func TestEngineHoldProduceCountsInFlight(t *testing.T) {
	e := newTestEngine(t, EngineConfig{SharedDeadline: true})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	// A fresh bucket: the first request is not held.
	h1, r1 := e.Client("u", "c").HoldProduce(15000, at(0))
	if h1 != 0 || r1 != 15000 {
		t.Fatalf("first: hold %v reserved %d", h1, r1)
	}
	// The second, pipelined behind it, is held as if the first were
	// recorded: 15000 B over the 10 s window floor at 1000 B/s is 5 s.
	h2, r2 := e.Client("u", "c").HoldProduce(1, at(0))
	if h2 != 5*time.Second {
		t.Fatalf("pipelined: hold %v, want 5s", h2)
	}
	e.Client("u", "c").Release(model.ProducerByteRate, r1, at(10))
	e.Client("u", "c").Release(model.ProducerByteRate, r2, at(10))
	// Nothing in flight and nothing recorded: no hold.
	if h, r := e.Client("u", "c").HoldProduce(1, at(20)); h != 0 {
		t.Fatalf("after release: hold %v", h)
	} else {
		e.Client("u", "c").Release(model.ProducerByteRate, r, at(20))
	}
	// Without SharedDeadline (Kafka's arithmetic alone) nothing is held.
	k := newTestEngine(t, EngineConfig{})
	k.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	k.Client("u", "c").HoldProduce(15000, at(0))
	if h, _ := k.Client("u", "c").HoldProduce(1, at(0)); h != 0 {
		t.Fatalf("without SharedDeadline: hold %v", h)
	}
}

// testClientIdNotSanitized: Kafka's sensor for client-id "client@#$%" with
// a client-id quota is Produce-:client@#$%, user tag empty, client raw.
func TestEngineClientIDNotSanitized(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
	e.Client("ANONYMOUS", "client@#$%").RecordProduce(100, at(0))
	u := e.Usage(at(0))
	if len(u) != 1 {
		t.Fatalf("usage %+v", u)
	}
	if name := "Produce-" + model.Sanitize(u[0].User) + ":" + u[0].ClientID; name != "Produce-:client@#$%" {
		t.Errorf("sensor name %q", name)
	}
}
