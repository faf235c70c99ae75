package quota

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// counts returns the buckets and routes e holds for k.
func counts(e *Engine, k model.Key) (buckets, routes int) {
	s := e.Stats()[k]
	return s.Buckets, s.Routes
}

// A client picking a new client-id per request: with a bucket per client-id
// (a default client-id quota), buckets and routes stay at their caps, and
// every eviction is counted.
func TestEngineMaxBucketsManyClientIDs(t *testing.T) {
	const maxBuckets, clients = 100, 3000
	e := newTestEngine(t, EngineConfig{MaxBuckets: maxBuckets, MaxRoutes: 1000})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
	for i := range clients {
		e.Client("mallory", fmt.Sprintf("id-%d", i)).RecordProduce(100, at(int64(i)))
		if b, r := counts(e, model.ProducerByteRate); b > maxBuckets || r > maxBuckets {
			t.Fatalf("after %d client-ids: %d buckets, %d routes; cap %d", i+1, b, r, maxBuckets)
		}
	}
	s := e.Stats()[model.ProducerByteRate]
	// A cap of 100 evicts one bucket at a time (1/64 of the cap, at least
	// one), and each evicted bucket takes its one route with it.
	if s.Buckets != maxBuckets || s.EvictedBuckets != clients-maxBuckets || s.EvictedRoutes != clients-maxBuckets {
		t.Errorf("stats %+v, want %d buckets and %d evictions", s, maxBuckets, clients-maxBuckets)
	}
	if s.EvictedThrottledBuckets != 0 {
		t.Errorf("%d throttled buckets evicted; none was throttled", s.EvictedThrottledBuckets)
	}
	// The least recently used went: the last 100 client-ids are the ones left.
	for _, u := range e.Usage(at(clients)) {
		var n int
		if _, err := fmt.Sscanf(u.ClientID, "id-%d", &n); err != nil || n < clients-maxBuckets {
			t.Errorf("bucket %q survived; want only the %d most recent", u.ClientID, maxBuckets)
		}
	}
	// Only the ProducerByteRate key has a quota: nothing else grew.
	for _, s := range e.Stats() {
		if s.Key != model.ProducerByteRate && (s.Buckets != 0 || s.Routes != 0) {
			t.Errorf("%v: %+v", s.Key, s)
		}
	}
}

// With a user quota every client-id of the user shares one bucket, but each
// (user, client-id) still gets a route: routes stay at their own cap.
func TestEngineMaxRoutesManyClientIDs(t *testing.T) {
	const maxRoutes, clients = 50, 2000
	e := newTestEngine(t, EngineConfig{MaxRoutes: maxRoutes})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1e9}))
	for i := range clients {
		e.Client("mallory", fmt.Sprintf("id-%d", i)).RecordProduce(100, at(int64(i)*1000))
		if b, r := counts(e, model.ProducerByteRate); b != 1 || r > maxRoutes {
			t.Fatalf("after %d client-ids: %d buckets, %d routes; cap %d", i+1, b, r, maxRoutes)
		}
	}
	s := e.Stats()[model.ProducerByteRate]
	if s.Routes != maxRoutes || s.EvictedRoutes != clients-maxRoutes || s.EvictedBuckets != 0 {
		t.Errorf("stats %+v, want %d routes, %d route evictions, no bucket evicted", s, maxRoutes, clients-maxRoutes)
	}
	// Evicting a route loses nothing: every byte is in the one bucket.
	if u := e.Usage(at(clients * 1000)); len(u) != 1 || u[0].Throttles != 0 {
		t.Errorf("usage %+v", u)
	}
	// The read-only view never holds more than the cap either.
	e.mu.Lock()
	v := len(e.mgr[model.ProducerByteRate].view.Load().routes)
	e.mu.Unlock()
	if v > maxRoutes {
		t.Errorf("published view holds %d routes, cap %d", v, maxRoutes)
	}
}

// A throttled bucket is not evicted in favour of new client-ids: its client
// stays throttled however many one-off client-ids arrive.
func TestEngineEvictionKeepsThrottledBuckets(t *testing.T) {
	for _, alg := range []ByteRateAlgorithm{ByteRateSampled, ByteRateTokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			e := newTestEngine(t, EngineConfig{MaxBuckets: 10, ByteRate: alg, SharedDeadline: true, MaxThrottle: time.Minute})
			e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
			// 40 000 B at 1000 B/s over the 10 s burst: throttled for 30 s.
			if d := e.Client("u", "victim").RecordProduce(40_000, at(0)); d != 30*time.Second {
				t.Fatalf("victim throttle %v, want 30s", d)
			}
			for i := range 1000 {
				e.Client("u", fmt.Sprintf("one-off-%d", i)).RecordProduce(1, at(int64(i)))
			}
			s := e.Stats()[model.ProducerByteRate]
			if s.Buckets != 10 || s.EvictedBuckets != 991 || s.EvictedThrottledBuckets != 0 {
				t.Fatalf("stats %+v, want 10 buckets, 991 evictions, no throttled one", s)
			}
			// Still throttled, on its old history: 1 s later 29 s remain.
			if d := e.Client("u", "victim").Hold(model.ProducerByteRate, at(1000)); d != 29*time.Second {
				t.Errorf("victim hold after the flood %v, want 29s", d)
			}
		})
	}
}

// When every bucket is throttled, the cap still holds: the bucket whose
// throttle ends first goes, and the eviction is counted as throttled.
func TestEngineEvictionAllThrottled(t *testing.T) {
	e := newTestEngine(t, EngineConfig{MaxBuckets: 3, SharedDeadline: true, MaxThrottle: time.Minute})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
	// Throttles of 10 s, 5 s and 20 s.
	for _, c := range []struct {
		id    string
		bytes int
	}{{"a", 20_000}, {"b", 15_000}, {"c", 30_000}} {
		if d := e.Client("u", c.id).RecordProduce(c.bytes, at(0)); d == 0 {
			t.Fatalf("%s not throttled", c.id)
		}
	}
	e.Client("u", "d").RecordProduce(1, at(100))
	s := e.Stats()[model.ProducerByteRate]
	if s.Buckets != 3 || s.EvictedBuckets != 1 || s.EvictedThrottledBuckets != 1 {
		t.Fatalf("stats %+v, want one throttled eviction", s)
	}
	left := map[string]bool{}
	for _, u := range e.Usage(at(100)) {
		left[u.ClientID] = true
	}
	if left["b"] || !left["a"] || !left["c"] || !left["d"] {
		t.Errorf("buckets left %v; want b (5 s, ends first) evicted", left)
	}
}

// Eviction is least recently used, by last record, not by creation.
func TestEngineEvictionLRU(t *testing.T) {
	for _, alg := range []ByteRateAlgorithm{ByteRateSampled, ByteRateTokenBucket} {
		e := newTestEngine(t, EngineConfig{MaxBuckets: 3, ByteRate: alg})
		e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
		e.Client("u", "a").RecordProduce(100, at(0))
		e.Client("u", "b").RecordProduce(100, at(1000))
		e.Client("u", "c").RecordProduce(100, at(2000))
		e.Client("u", "a").RecordProduce(100, at(5000))
		e.Client("u", "d").RecordProduce(100, at(6000))
		left := map[string]bool{}
		for _, u := range e.Usage(at(6000)) {
			left[u.ClientID] = true
		}
		if left["b"] || !left["a"] || !left["c"] || !left["d"] {
			t.Errorf("%v: left %v, want b (least recently used) evicted", alg, left)
		}
	}
}

// A handle whose bucket was evicted records into a fresh bucket.
func TestEngineEvictedClientHandle(t *testing.T) {
	e := newTestEngine(t, EngineConfig{MaxBuckets: 1})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
	c := e.Client("u", "first")
	c.RecordProduce(5000, at(0))
	e.Client("u", "second").RecordProduce(1, at(1)) // evicts first
	if d := c.RecordProduce(6000, at(2)); d != 0 {
		t.Errorf("the evicted bucket's history throttled the handle: %v", d)
	}
	if b, _ := counts(e, model.ProducerByteRate); b != 1 {
		t.Errorf("%d buckets, cap 1", b)
	}
}

// Idle routes expire like idle buckets, on a sweep that the hot path runs by
// itself once it is due (explicit clock, no Expire call).
func TestEngineRouteExpiry(t *testing.T) {
	e := newTestEngine(t, EngineConfig{Expiry: time.Minute})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1e9}))
	e.Client("u", "gone").RecordProduce(1, at(0))
	e.Client("u", "kept").RecordProduce(1, at(0))
	for range 3 { // publish the routes to the read-only view
		e.Client("u", "kept").RecordProduce(1, at(0))
	}
	e.Client("u", "kept").RecordProduce(1, at(40_000)) // sweep clock started at 0: not due until 30 s; it runs here
	if s := e.Stats()[model.ProducerByteRate]; s.Routes != 2 || s.ExpiredRoutes != 0 {
		t.Fatalf("at 40 s: %+v, want both routes", s)
	}
	// At 60 s "gone" has been idle a minute; the next sweep is due at 70 s.
	e.Client("u", "kept").RecordProduce(1, at(69_999))
	if s := e.Stats()[model.ProducerByteRate]; s.Routes != 2 {
		t.Fatalf("before the sweep is due: %+v", s)
	}
	e.Client("u", "kept").RecordProduce(1, at(70_000))
	s := e.Stats()[model.ProducerByteRate]
	if s.Routes != 1 || s.ExpiredRoutes != 1 || s.Buckets != 1 || s.ExpiredBuckets != 0 {
		t.Fatalf("at 70 s: %+v, want the idle route expired and the shared bucket kept", s)
	}
	// Then the bucket goes too, a minute after its last record.
	e.Client("v", "other").RecordProduce(1, at(200_000))
	if s := e.Stats()[model.ProducerByteRate]; s.ExpiredBuckets != 1 || s.Buckets != 1 {
		t.Errorf("at 200 s: %+v, want u's bucket expired and v's alone", s)
	}
}

// Busiest keeps the n busiest buckets, ordered like Usage, and counts all.
func TestEngineBusiest(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}))
	for i := range 20 {
		e.Client("u", fmt.Sprintf("c%02d", i)).RecordProduce(100*(i+1), at(0))
	}
	top, live := e.Busiest(at(0), 3)
	if live[model.ProducerByteRate] != 20 || live[model.ConsumerByteRate] != 0 {
		t.Errorf("live %v", live)
	}
	if len(top) != 3 || top[0].ClientID != "c17" || top[1].ClientID != "c18" || top[2].ClientID != "c19" {
		t.Errorf("top %+v, want c17..c19 in tag order", top)
	}
	if top, _ := e.Busiest(at(0), 0); len(top) != 0 {
		t.Errorf("n=0 returned %d", len(top))
	}
	if all, _ := e.Busiest(at(0), 100); len(all) != 20 {
		t.Errorf("n=100 returned %d", len(all))
	}
}

// Many goroutines bring new client-ids while others record into one bucket
// and read the engine; the caps hold throughout. Run with -race.
func TestEngineCapsConcurrent(t *testing.T) {
	const maxBuckets = 64
	e := newTestEngine(t, EngineConfig{MaxBuckets: maxBuckets, MaxRoutes: maxBuckets})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1e9}))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				e.Client("u", fmt.Sprintf("w%d-%d", w, i)).RecordProduce(10, at(int64(i)))
				e.Client("u", "steady").RecordProduce(10, at(int64(i)))
				if i%200 == 0 {
					e.Busiest(at(int64(i)), 5)
					if b, r := counts(e, model.ProducerByteRate); b > maxBuckets || r > maxBuckets {
						t.Errorf("%d buckets, %d routes over the cap %d", b, r, maxBuckets)
					}
				}
			}
		}()
	}
	wg.Wait()
	if b, r := counts(e, model.ProducerByteRate); b > maxBuckets || r > maxBuckets {
		t.Errorf("%d buckets, %d routes over the cap %d", b, r, maxBuckets)
	}
}

// checkClock verifies the eviction rings against the maps they index.
func checkClock(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.mgr {
		m := &e.mgr[k]
		if len(m.buckets) > e.cfg.MaxBuckets {
			t.Fatalf("%v: %d buckets, cap %d", model.Key(k), len(m.buckets), e.cfg.MaxBuckets)
		}
		if len(m.clk.ring) != len(m.buckets) {
			t.Fatalf("%v: ring %d, buckets %d", model.Key(k), len(m.clk.ring), len(m.buckets))
		}
		for i, b := range m.clk.ring {
			if int(b.slot) != i || m.buckets[b.tags()] != b || b.dead {
				t.Fatalf("%v: ring slot %d holds %q/%q (slot %d, dead %v)", model.Key(k), i, b.user, b.client, b.slot, b.dead)
			}
		}
		routes := m.routes()
		if len(routes) > e.cfg.MaxRoutes {
			t.Fatalf("%v: %d routes, cap %d", model.Key(k), len(routes), e.cfg.MaxRoutes)
		}
		if v := len(m.view.Load().routes); v > e.cfg.MaxRoutes {
			t.Fatalf("%v: view holds %d routes, cap %d", model.Key(k), v, e.cfg.MaxRoutes)
		}
		n := 0
		for i, rs := range m.clk.rring {
			if rs.r == nil {
				continue
			}
			n++
			if rs.r.slot != i || routes[rs.id] != rs.r {
				t.Fatalf("%v: route ring slot %d holds %v (slot %d)", model.Key(k), i, rs.id, rs.r.slot)
			}
		}
		if n != len(routes) {
			t.Fatalf("%v: route ring %d, routes %d", model.Key(k), n, len(routes))
		}
	}
}

// Random traffic, quota changes and sweeps against small caps: the rings
// always match the maps, every request lands in a live bucket, and no
// request loops on a dead one.
func TestEngineCapsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sets := []model.Quotas{
		quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 1000}),
		quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}),
		quotasOf(t, model.ProducerByteRate, entry{ent(deflt, deflt), 1000}, entry{ent(ex("u1"), none), 500}),
	}
	for _, alg := range []ByteRateAlgorithm{ByteRateSampled, ByteRateTokenBucket} {
		e := newTestEngine(t, EngineConfig{MaxBuckets: 7, MaxRoutes: 11, Expiry: 20 * time.Second, ByteRate: alg, SharedDeadline: true})
		e.SetQuotas(sets[0])
		now := int64(0)
		handles := map[string]*Client{}
		for step := range 5000 {
			now += rng.Int64N(300)
			user, client := fmt.Sprintf("u%d", rng.IntN(4)), fmt.Sprintf("c%d", rng.IntN(30))
			switch x := rng.IntN(100); {
			case x < 70:
				e.Client(user, client).RecordProduce(1+rng.IntN(3000), at(now))
			case x < 85:
				h := handles[user+"/"+client]
				if h == nil {
					h = e.Client(user, client)
					handles[user+"/"+client] = h
				}
				hold, res := h.HoldProduce(1+rng.IntN(3000), at(now))
				h.Release(model.ProducerByteRate, res, at(now+hold.Milliseconds()))
			case x < 88:
				e.SetQuotas(sets[rng.IntN(len(sets))])
			case x < 90:
				e.Expire(at(now))
			default:
				e.Busiest(at(now), 3)
			}
			checkClock(t, e)
			if t.Failed() {
				t.Fatalf("%v step %d", alg, step)
			}
		}
		if s := e.Stats()[model.ProducerByteRate]; s.EvictedBuckets == 0 || s.EvictedRoutes == 0 {
			t.Errorf("%v: the caps were never reached: %+v", alg, s)
		}
	}
}

// With a user quota several routes share a bucket; when the bucket is
// evicted the routes other than its first are left to be replaced lazily,
// and a request through one of them gets a fresh bucket, not a dead one.
func TestEngineStaleRouteAfterEviction(t *testing.T) {
	e := newTestEngine(t, EngineConfig{MaxBuckets: 1, ByteRate: ByteRateSampled})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(deflt, none), 1000}))
	e.Client("a", "c1").RecordProduce(5000, at(0))
	e.Client("a", "c2").RecordProduce(5000, at(0)) // a's bucket is full: 10 000 B
	for range 3 {                                  // publish both routes to the view
		e.Client("a", "c2").RecordProduce(0, at(0))
	}
	e.Client("b", "c1").RecordProduce(1, at(1000)) // evicts a's bucket
	if s := e.Stats()[model.ProducerByteRate]; s.EvictedBuckets != 1 || s.Buckets != 1 {
		t.Fatalf("stats %+v", s)
	}
	// a starts afresh: 10 000 B pass, as for a new client.
	if d := e.Client("a", "c2").RecordProduce(10_000, at(2000)); d != 0 {
		t.Errorf("a's history survived its eviction: throttle %v", d)
	}
	checkClock(t, e)
	if u := e.Usage(at(2000)); len(u) != 1 || u[0].User != "a" || u[0].Rate != 1000 {
		t.Errorf("usage %+v, want a's fresh bucket alone", u)
	}
}
