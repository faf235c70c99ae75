package quota

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func tenantSet(t testing.TB, ts ...Tenant) *TenantSet {
	t.Helper()
	s, err := NewTenantSet(ts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ceilings(kv ...any) map[model.Key]float64 {
	m := map[model.Key]float64{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(model.Key)] = kv[i+1].(float64)
	}
	return m
}

// A principal listed by a tenant belongs to it; else the longest prefix;
// else the first tenant (by name) whose rule accepts it.
func TestTenantResolution(t *testing.T) {
	s := tenantSet(t,
		Tenant{Name: "b-rules", Match: func(p string) bool { return strings.HasSuffix(p, "@b") }},
		Tenant{Name: "a-rules", Match: func(p string) bool { return strings.HasSuffix(p, "@b") || p == "ruled" }},
		Tenant{Name: "team", Prefixes: []string{"team-"}},
		Tenant{Name: "team-a", Prefixes: []string{"team-a-"}, Principals: []string{"alice", "team-b-x"}},
	)
	for p, want := range map[string]string{
		"alice":       "team-a", // listed
		"team-b-x":    "team-a", // listed beats a prefix
		"team-a-etl":  "team-a", // the longest prefix
		"team-a-":     "team-a", // equal to the prefix
		"team-c":      "team",
		"svc@b":       "a-rules", // rules by tenant name
		"ruled":       "a-rules",
		"team-a-x@b":  "team-a", // a prefix beats a rule
		"bob":         "",
		"":            "",
		"team":        "",
		"TEAM-A-case": "",
	} {
		got, ok := s.Of(p)
		if got != want || ok != (want != "") {
			t.Errorf("Of(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
}

func TestTenantSetRefuses(t *testing.T) {
	for _, c := range []struct {
		ts   []Tenant
		want string
	}{
		{[]Tenant{{}}, "needs a name"},
		{[]Tenant{{Name: strings.Repeat("x", 250)}}, "bytes long"},
		{[]Tenant{{Name: "a"}, {Name: "a"}}, "defined twice"},
		{[]Tenant{{Name: "a", Principals: []string{"u"}}, {Name: "b", Principals: []string{"u"}}}, "also listed by tenant"},
		{[]Tenant{{Name: "a", Principals: []string{""}}}, "empty principal"},
		{[]Tenant{{Name: "a", Prefixes: []string{""}}}, "empty principal prefix"},
		{[]Tenant{{Name: "a", Prefixes: []string{"p"}}, {Name: "b", Prefixes: []string{"p"}}}, "also given by tenant"},
		{[]Tenant{{Name: "a", Ceilings: ceilings(model.RequestPercentage, 10.0)}}, "takes no tenant ceiling"},
		{[]Tenant{{Name: "a", Ceilings: ceilings(model.ProducerByteRate, 0.0)}}, "greater than 0"},
		{[]Tenant{{Name: "a", Ceilings: ceilings(model.ProducerByteRate, math.NaN())}}, "greater than 0"},
		{[]Tenant{{Name: "a", Ceilings: ceilings(model.ProducerByteRate, math.Inf(1))}}, "greater than 0"},
		{[]Tenant{{Name: "a", Options: model.Options{HasBurst: true, Burst: -1}}}, "burst_seconds"},
	} {
		_, err := NewTenantSet(c.ts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.ts, err, c.want)
		}
	}
}

// sim drives obedient producers as the gateway sees them: each
// connection sends a request of size bytes, which waits what HoldProduce
// says, is answered after rtt, is recorded then (RecordProduce) and mutes
// the connection for the throttle, as Kafka clients and the gateway's mute
// do; then it sends the next. Virtual milliseconds, no sleeping.
type sim struct {
	e     *Engine
	q     simQueue
	rtt   int64
	bytes map[string][]float64 // per user, per second admitted
}

type simConn struct {
	req, resp *Client
	user      string
	size      int
	at        int64 // next event
	phase     int   // 0: send, 1: answered
	reserved  int64
	from, to  int64 // active between (ms offsets)
	every     int64 // 0: as fast as allowed; else one request per every ms at most
}

type simQueue []*simConn

func (q simQueue) Len() int           { return len(q) }
func (q simQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)        { *q = append(*q, x.(*simConn)) }
func (q *simQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

func newSim(e *Engine) *sim { return &sim{e: e, rtt: 2, bytes: map[string][]float64{}} }

// conn adds a connection of user that sends size-byte requests from
// offset from to offset to (ms).
func (s *sim) conn(user string, size int, from, to, every int64) {
	c := &simConn{req: s.e.Client(user, "app"), resp: s.e.Client(user, "app"), user: user, size: size, at: from, from: from, to: to, every: every}
	heap.Push(&s.q, c)
}

func (s *sim) run(untilMs int64) {
	for s.q.Len() > 0 {
		c := heap.Pop(&s.q).(*simConn)
		if c.at >= c.to {
			continue
		}
		if c.at >= untilMs {
			heap.Push(&s.q, c)
			return
		}
		now := at(c.at)
		switch c.phase {
		case 0:
			hold, res := c.req.HoldProduce(c.size, now)
			c.reserved = res
			c.at += hold.Milliseconds() + s.rtt
			c.phase = 1
		case 1:
			c.resp.Release(model.ProducerByteRate, c.reserved, now)
			t := c.resp.RecordProduce(c.size, now)
			sec := int(c.at / 1000)
			b := s.bytes[c.user]
			for len(b) <= sec {
				b = append(b, 0)
			}
			b[sec] += float64(c.size)
			s.bytes[c.user] = b
			next := c.at + max(t.Milliseconds(), 1)
			if c.every > 0 {
				next = max(next, c.at+c.every)
			}
			c.at = next
			c.phase = 0
		}
		heap.Push(&s.q, c)
	}
}

// sum is what user got in seconds [from, to); "" sums everyone.
func (s *sim) sum(user string, from, to int) float64 {
	var t float64
	for u, b := range s.bytes {
		if user != "" && u != user {
			continue
		}
		for i := from; i < to && i < len(b); i++ {
			t += b[i]
		}
	}
	return t
}

func nearly(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	t.Logf("%s: %.0f = %.3f × %.0f", what, got, got/want, want)
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.3f × the expected %.0f, want within ±%.0f %%", what, got/want, want, tol*100)
	}
}

func tenantEngine(t testing.TB, q model.Quotas, ts ...Tenant) *Engine {
	t.Helper()
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true})
	e.SetQuotas(q)
	e.SetTenants(tenantSet(t, ts...), at(0))
	return e
}

const tc = 1 << 20 // a tenant ceiling, B/s

// The scenario: one tenant, ten principals at full speed, each
// with its own quota of 0.3 C (so 3 C together) under the ceiling C: the
// tenant gets C within ±5 % over 30 s once its burst is spent, and each
// principal gets its fair share C/10 (within ±10 %), never more than its
// own quota.
func TestTenantTenPrincipalsShareTheCeiling(t *testing.T) {
	var q model.Quotas
	must(t, q.Set(model.UserEntity(model.Default()), model.ProducerByteRate, 0.3*tc))
	var users []string
	for i := range 10 {
		users = append(users, fmt.Sprintf("u%d", i))
	}
	e := tenantEngine(t, q, Tenant{Name: "t", Principals: users, Ceilings: ceilings(model.ProducerByteRate, float64(tc))})
	s := newSim(e)
	for i, u := range users {
		// Uneven clients: 1 to 3 connections, 16 to 64 KiB requests.
		for range 1 + i%3 {
			s.conn(u, (16+16*(i%4))<<10, 0, 45_000, 0)
		}
	}
	s.run(45_000)
	nearly(t, "the tenant, 15–45 s", s.sum("", 15, 45), 30*tc, 0.05)
	for _, u := range users {
		got := s.sum(u, 15, 45)
		nearly(t, u+", 15–45 s", got, 3*tc, 0.10)
		if got > 0.3*tc*30*1.02 {
			t.Errorf("%s got more than its own quota", u)
		}
	}
	us := e.TenantUsage(at(45_000))
	if len(us) != 1 || us[0].Active != 10 || us[0].FairShare != float64(tc)/10 || us[0].Throttles == 0 {
		t.Errorf("usage %+v", us)
	}
}

// A principal alone uses the ceiling up to its own quota: with an own
// quota of 0.4 C it gets 0.4 C; without one, C.
func TestTenantAloneUsesTheCeiling(t *testing.T) {
	for _, own := range []float64{0.4 * tc, 0} {
		var q model.Quotas
		if own > 0 {
			must(t, q.Set(model.UserEntity(model.Exact("solo")), model.ProducerByteRate, own))
		}
		e := tenantEngine(t, q, Tenant{Name: "t", Principals: []string{"solo", "idle"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))})
		s := newSim(e)
		s.conn("solo", 32<<10, 0, 45_000, 0)
		s.conn("solo", 32<<10, 0, 45_000, 0)
		s.run(45_000)
		want := own
		if want == 0 {
			want = tc
		}
		nearly(t, fmt.Sprintf("alone, own quota %.0f, 15–45 s", own), s.sum("solo", 15, 45), 30*want, 0.05)
	}
}

// Work-conserving: a light principal sending 0.1 C leaves 0.9 C that the
// two heavy ones share; and the heavy one with four connections cannot
// starve the one with one below the fair share.
func TestTenantBorrowsIdleCapacity(t *testing.T) {
	e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"light", "heavy", "greedy"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))})
	s := newSim(e)
	s.conn("light", 16<<10, 0, 45_000, 160) // 100 KiB/s: 0.1 C
	s.conn("heavy", 32<<10, 0, 45_000, 0)
	for range 4 {
		s.conn("greedy", 64<<10, 0, 45_000, 0)
	}
	s.run(45_000)
	nearly(t, "the tenant, 15–45 s", s.sum("", 15, 45), 30*tc, 0.05)
	nearly(t, "light", s.sum("light", 15, 45), 3*tc, 0.05)
	heavy, greedy := s.sum("heavy", 15, 45), s.sum("greedy", 15, 45)
	if fair := 30.0 * tc / 3; heavy < 0.95*fair || greedy < 0.95*fair {
		t.Errorf("heavy %.2f C, greedy %.2f C: each should get at least its fair share, C/3", heavy/30/tc, greedy/30/tc)
	}
	t.Logf("heavy %.3f C, greedy %.3f C", heavy/30/tc, greedy/30/tc)
}

// Nesting: a principal's own quota still binds below the tenant's share,
// a principal outside every tenant is untouched by the ceilings, and a
// shadow tenant throttles nothing but counts what it would have done.
func TestTenantNestingAndShadow(t *testing.T) {
	var q model.Quotas
	must(t, q.Set(model.UserEntity(model.Exact("small")), model.ProducerByteRate, 0.1*tc))
	e := tenantEngine(t, q,
		Tenant{Name: "t", Principals: []string{"small", "big"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))},
		Tenant{Name: "s", Principals: []string{"shadowed"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc)), Options: model.Options{Shadow: true}},
	)
	s := newSim(e)
	s.conn("small", 16<<10, 0, 45_000, 0)
	s.conn("big", 32<<10, 0, 45_000, 0)
	s.conn("outsider", 64<<10, 0, 20_000, 0)
	s.conn("shadowed", 64<<10, 0, 20_000, 0)
	s.run(45_000)
	nearly(t, "small (own quota 0.1 C)", s.sum("small", 15, 45), 3*tc, 0.05)
	nearly(t, "big (borrows the rest)", s.sum("big", 15, 45), 27*tc, 0.05)
	if got := s.sum("outsider", 0, 20); got < 50*tc {
		t.Errorf("an outsider was held: %.1f C in 20 s", got/tc)
	}
	if got := s.sum("shadowed", 0, 20); got < 50*tc {
		t.Errorf("a shadow tenant's principal was held: %.1f C in 20 s", got/tc)
	}
	var sh TenantUsage
	for _, u := range e.TenantUsage(at(20_000)) {
		if u.Tenant == "s" {
			sh = u
		}
	}
	if !sh.Shadow || sh.Throttles != 0 || sh.Shadowed.Records == 0 || sh.Shadowed.Throttled == 0 {
		t.Errorf("shadow tenant usage %+v", sh)
	}
}

// burst_seconds 0 on a tenant: no burst anywhere, the tenant gets C from
// its first second; Kafka's burst otherwise.
func TestTenantBurst(t *testing.T) {
	for _, burst := range []*float64{nil, ptr(0.0)} {
		o := model.Options{}
		if burst != nil {
			o = model.Options{HasBurst: true, Burst: *burst}
		}
		e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a", "b"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc)), Options: o})
		s := newSim(e)
		s.conn("a", 16<<10, 0, 20_000, 0)
		s.conn("b", 16<<10, 0, 20_000, 0)
		s.run(20_000)
		first := s.sum("", 0, 5)
		if burst == nil {
			nearly(t, "Kafka's burst: first 5 s", first, 15*tc, 0.05)
		} else {
			nearly(t, "no burst: first 5 s", first, 5*tc, 0.05)
			nearly(t, "no burst: first second", s.sum("", 0, 1), tc, 0.10)
		}
		nearly(t, "10–20 s", s.sum("", 10, 20), 10*tc, 0.05)
	}
}

func ptr[T any](v T) *T { return &v }

// A changed ceiling applies to the tenant's history; removing the tenant
// frees its principals; a principal moved to another tenant follows.
func TestTenantChanges(t *testing.T) {
	e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))})
	c := e.Client("a", "x")
	for ms := int64(0); ms < 12_000; ms += 100 {
		c.RecordProduce(tc/10, at(ms)) // exactly C: the burst stays
	}
	if th := c.RecordProduce(1, at(12_000)); th != 0 {
		t.Fatalf("at C: throttled %v", th)
	}
	e.SetTenants(tenantSet(t, Tenant{Name: "t", Principals: []string{"a"}, Ceilings: ceilings(model.ProducerByteRate, tc/4.0)}), at(12_000))
	for ms := int64(12_000); ms < 30_000; ms += 100 {
		c.RecordProduce(tc/10, at(ms))
	}
	if th := c.RecordProduce(1, at(30_000)); th == 0 {
		t.Fatal("a lowered ceiling did not throttle at 4 × it")
	}
	e.SetTenants(tenantSet(t, Tenant{Name: "u", Principals: []string{"b"}, Ceilings: ceilings(model.ProducerByteRate, tc/4.0)}), at(30_000))
	if th := c.RecordProduce(tc, at(30_000)); th != 0 {
		t.Fatalf("a principal of a removed tenant throttled %v", th)
	}
	if n, ok := e.TenantOf("a"); ok {
		t.Fatalf("a still in %q", n)
	}
	e.SetTenants(nil, at(30_000))
	if us := e.TenantUsage(at(30_000)); len(us) != 0 {
		t.Fatalf("usage after removing every tenant: %+v", us)
	}
}

// Mutations: a strict request is refused (THROTTLING_QUOTA_EXCEEDED) once
// the tenant's ceiling binds and the principal has used its share, even
// without a quota of its own.
func TestTenantMutations(t *testing.T) {
	e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a", "b"}, Ceilings: ceilings(model.ControllerMutationRate, 2.0)})
	c := e.Client("a", "x")
	if !e.TenantsLimit(model.ControllerMutationRate) || e.TenantsLimit(model.ProducerByteRate) {
		t.Fatal("TenantsLimit")
	}
	// The burst: N·W·Q = 22 partitions, then a share of one window.
	accepted := 0
	for i := range 40 {
		if _, refused := c.RecordMutation(1, true, at(int64(i))); !refused {
			accepted++
		}
	}
	if accepted < 22 || accepted > 26 {
		t.Errorf("accepted %d of 40 partitions at once, want the burst of 22 and a share's few", accepted)
	}
	th, refused := c.RecordMutation(1, true, at(50))
	if !refused || th <= 0 {
		t.Errorf("strict past the ceiling: %v %v", th, refused)
	}
	// Permissive: charged, throttled.
	if th, refused := c.RecordMutation(1, false, at(60)); refused || th <= 0 {
		t.Errorf("permissive past the ceiling: %v %v", th, refused)
	}
}

// Fetches: the tenant clamps max_bytes to what its principal may take
// while the ceiling binds, and holds a throttled principal.
func TestTenantFetchClampAndHold(t *testing.T) {
	e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a"}, Ceilings: ceilings(model.ConsumerByteRate, float64(tc))})
	c := e.Client("a", "x")
	clamp, res := c.ReserveFetch(math.MaxInt32, at(0))
	if clamp != 10*tc || res != int64(clamp) {
		t.Fatalf("first fetch: clamp %d reserved %d, want the ceiling's burst %d", clamp, res, 10*tc)
	}
	c.Release(model.ConsumerByteRate, res, at(1))
	c.RecordFetch(int(clamp), at(1)) // the burst: borrowed, not throttled
	th := c.RecordFetch(2*tc, at(2)) // two seconds past it
	if th <= 0 {
		t.Fatalf("past the ceiling: no throttle")
	}
	if h := c.Hold(model.ConsumerByteRate, at(3)); h <= 0 {
		t.Fatalf("no hold while throttled")
	}
	clamp, res = c.ReserveFetch(math.MaxInt32, at(1000))
	if clamp > tc || clamp < 1 {
		t.Fatalf("fetch while the ceiling binds: clamp %d", clamp)
	}
	c.Release(model.ConsumerByteRate, res, at(5001))
	if got := c.FetchMaxBytes(at(5001)); got > 10*tc {
		t.Fatalf("FetchMaxBytes %d", got)
	}
}

// The members a tenant keeps state for are bounded by quota.max_buckets
// however many principals a prefix lets in.
func TestTenantMembersBounded(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true, MaxBuckets: 100})
	e.SetTenants(tenantSet(t, Tenant{Name: "t", Prefixes: []string{"svc-"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))}), at(0))
	for i := range 1000 {
		e.Client(fmt.Sprintf("svc-%d", i), "x").RecordProduce(100, at(int64(i)))
	}
	if n := len(e.TenantMembers("t", at(1000))); n > 100 {
		t.Fatalf("%d member shares for a cap of 100", n)
	}
	// Idle for the expiry: dropped.
	e.Client("svc-x", "x").RecordProduce(1, at(2*3600_000))
	e.Client("svc-y", "x").RecordProduce(1, at(2*3600_000+31_000))
	if n := len(e.TenantMembers("t", at(2*3600_000+31_000))); n > 2 {
		t.Fatalf("%d members after an hour idle", n)
	}
}

// Two engines that exchange their usage (as a Tollgate cluster's instances
// do every interval) hold the tenant to its ceiling together: principals on
// both get C in total, and the report names the tenant's buckets.
func TestTenantExchange(t *testing.T) {
	mk := func() *Engine {
		e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a", "b"}, Ceilings: ceilings(model.ProducerByteRate, float64(tc))})
		e.JoinCluster(500*time.Millisecond, at(0))
		e.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, at(0))
		return e
	}
	x, y := mk(), mk()
	sx, sy := newSim(x), newSim(y)
	sx.conn("a", 32<<10, 0, 45_000, 0)
	sy.conn("b", 32<<10, 0, 45_000, 0)
	sy.conn("a", 32<<10, 0, 45_000, 0)
	var sawTenant bool
	for ms := int64(500); ms <= 45_000; ms += 500 {
		sx.run(ms)
		sy.run(ms)
		dx, dy := x.DrainUsage(nil, at(ms)), y.DrainUsage(nil, at(ms))
		for _, d := range append(dx, dy...) {
			sawTenant = sawTenant || (d.Tenant == "t" && d.User == "")
		}
		x.ApplyRemote(dy, at(ms))
		y.ApplyRemote(dx, at(ms))
		x.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, at(ms))
		y.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, at(ms))
	}
	if !sawTenant {
		t.Error("no delta named the tenant's ceiling")
	}
	total := sx.sum("", 15, 45) + sy.sum("", 15, 45)
	nearly(t, "both instances, 15–45 s", total, 30*tc, 0.06)
	nearly(t, "a (on both)", sx.sum("a", 15, 45)+sy.sum("a", 15, 45), 15*tc, 0.12)
}

// Producer ids: a tenant's producer_ids_rate ceiling holds its principals'
// new ids once it binds and the principal has used its share, even without
// a quota of its own; a principal of no tenant is not held.
func TestTenantProducerIDs(t *testing.T) {
	e := tenantEngine(t, model.Quotas{}, Tenant{Name: "t", Principals: []string{"a", "b"}, Ceilings: ceilings(model.ProducerIDsRate, 1.0)})
	if !e.TenantsLimit(model.ProducerIDsRate) {
		t.Fatal("TenantsLimit")
	}
	c := e.Client("a", "x")
	held := 0
	for i := range 30 {
		if c.HoldProducerID(at(int64(i))) > 0 {
			held++
			continue
		}
		c.RecordProducerID(at(int64(i)))
	}
	if held == 0 {
		t.Fatal("30 new ids at once under a ceiling of 1/s: none held")
	}
	if h := e.Client("outsider", "x").HoldProducerID(at(40)); h != 0 {
		t.Fatalf("a principal of no tenant held %v", h)
	}
}
