package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// The share algorithm in virtual time: simulated instances, each a real
// quota.Engine and a real Exchange, connected by a simulated network whose
// delay, loss and partitions the test controls; simulated connections that
// behave as Kafka producers do (send, obey the throttle the answer
// carries, send again). Everything but the network is the production code.

// simNet delivers every published report to every instance (the publisher
// included, as a topic would) after a delay, losing some.
type simNet struct {
	mu    sync.Mutex
	nodes []*simNode
	delay time.Duration
	jit   time.Duration
	loss  float64
	rng   *rand.Rand
}

type simNode struct {
	net *simNet
	in  chan []byte
	cut atomic.Bool // cut off: publishes fail, nothing arrives
}

var errCut = errors.New("simnet: cut off")

func (n *simNet) node() *simNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	nd := &simNode{net: n, in: make(chan []byte, 1024)}
	n.nodes = append(n.nodes, nd)
	return nd
}

func (s *simNode) Publish(_ context.Context, b []byte) error {
	if s.cut.Load() {
		return errCut
	}
	n := s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, to := range n.nodes {
		if to.cut.Load() || (n.loss > 0 && n.rng.Float64() < n.loss) {
			continue
		}
		d := n.delay
		if n.jit > 0 {
			d += time.Duration(n.rng.Int64N(int64(n.jit)))
		}
		to := to
		time.AfterFunc(d, func() {
			if to.cut.Load() {
				return
			}
			select {
			case to.in <- b:
			default:
			}
		})
	}
	return nil
}

func (s *simNode) Receive(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// simInstance is one gateway: an engine and its exchange.
type simInstance struct {
	id     string
	e      *quota.Engine
	x      *Exchange
	node   *simNode
	cancel context.CancelFunc
	done   chan struct{}
}

type simCluster struct {
	t        *testing.T
	net      *simNet
	cfg      quota.EngineConfig
	q        float64
	interval time.Duration
	inst     []*simInstance
}

func newSimCluster(t *testing.T, n int, alg quota.ByteRateAlgorithm, q float64) *simCluster {
	c := &simCluster{t: t, q: q, interval: 500 * time.Millisecond,
		net: &simNet{delay: 20 * time.Millisecond, jit: 30 * time.Millisecond, rng: rand.New(rand.NewPCG(1, 2))},
		cfg: quota.EngineConfig{ByteRate: alg, SharedDeadline: true}}
	for i := range n {
		c.inst = append(c.inst, c.start(fmt.Sprintf("i%d", i)))
	}
	return c
}

// start runs a fresh instance (a restart when id was running before: a new
// incarnation with an empty engine, as after kill -9).
func (c *simCluster) start(id string) *simInstance {
	e, err := quota.NewEngine(c.cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	var qs model.Quotas
	if err := qs.Set(model.ClientEntity(model.Exact("tenant")), model.ProducerByteRate, c.q); err != nil {
		c.t.Fatal(err)
	}
	e.SetQuotas(qs)
	e.JoinCluster(c.interval, time.Now())
	node := c.net.node()
	x := NewExchange(ExchangeConfig{Self: Member{ID: id, Incarnation: time.Now().UnixMilli()}, Interval: c.interval,
		Ledger: e, Transport: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	in := &simInstance{id: id, e: e, x: x, node: node, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(in.done)
		x.Run(ctx)
	}()
	return in
}

func (c *simCluster) stop(i int) {
	in := c.inst[i]
	in.node.cut.Store(true) // kill -9: no leave report either
	in.cancel()
	<-in.done
}

func (c *simCluster) stopAll() {
	for _, in := range c.inst {
		in.cancel()
		<-in.done
	}
}

// meter counts admitted bytes per virtual second.
type meter struct {
	mu    sync.Mutex
	start time.Time
	secs  []float64
}

func (m *meter) add(now time.Time, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := int(now.Sub(m.start) / time.Second)
	for len(m.secs) <= s {
		m.secs = append(m.secs, 0)
	}
	m.secs[s] += v
}

// sum returns the bytes admitted in seconds [from, to).
func (m *meter) sum(from, to int) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t float64
	for s := from; s < to && s < len(m.secs); s++ {
		t += m.secs[s]
	}
	return t
}

// connOn runs conn on instance in until until, in wg.
func connOn(wg *sync.WaitGroup, m *meter, in *simInstance, until time.Time) {
	wg.Go(func() { conn(m, func() *simInstance { return in }, until, nil) })
}

// conn is one producer connection of client "tenant" on an instance: it
// sends 16 KiB requests as fast as a 1 ms round trip lets it (16 MiB/s,
// far above Q), and after a throttled answer waits the throttle, as Kafka
// clients do and the gateway's mute enforces. It runs until stop is closed
// or until is reached; where reads the instance to use at every request,
// so that a connection can move.
func conn(m *meter, where func() *simInstance, until time.Time, stop <-chan struct{}) {
	const size = 16 << 10
	var cl *quota.Client
	var on *simInstance
	for time.Now().Before(until) {
		select {
		case <-stop:
			return
		default:
		}
		in := where()
		if in != on {
			on, cl = in, in.e.Client("", "tenant")
		}
		now := time.Now()
		t := cl.RecordProduce(size, now)
		m.add(now, size)
		time.Sleep(max(t, time.Millisecond))
	}
}

// within fails unless got is within ±tol of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	t.Logf("%s: %.0f bytes = %.3f × the quota's %.0f", what, got, got/want, want)
	if got < want*(1-tol) || got > want*(1+tol) {
		t.Errorf("%s: %.3f × what the quota allows, want within ±%.0f %%", what, got/want, tol*100)
	}
}

const simQ = 1 << 20 // 1 MiB/s

func algorithms() []quota.ByteRateAlgorithm {
	return []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled}
}

// alone runs the connections of spread all on one engine that exchanges
// with nobody — one Kafka broker's arithmetic — for dur and returns its
// meter: the reference the sampled algorithm is held to, since Kafka's
// sampled rate itself does not give an obedient client exactly Q.
func alone(t *testing.T, alg quota.ByteRateAlgorithm, conns int, dur time.Duration) *meter {
	var m *meter
	synctest.Test(t, func(t *testing.T) {
		e, err := quota.NewEngine(quota.EngineConfig{ByteRate: alg, SharedDeadline: true})
		if err != nil {
			t.Fatal(err)
		}
		var qs model.Quotas
		qs.Set(model.ClientEntity(model.Exact("tenant")), model.ProducerByteRate, simQ)
		e.SetQuotas(qs)
		in := &simInstance{e: e}
		m = &meter{start: time.Now()}
		until := time.Now().Add(dur)
		var wg sync.WaitGroup
		for range conns {
			connOn(&wg, m, in, until)
		}
		wg.Wait()
	})
	return m
}

// holds checks the admitted bytes of seconds [from, to): within ±tol of Q
// under the token bucket (the default); under Kafka's sampled rate, never
// above Q·(1+tol) and at least what one broker gives the same client,
// less tol.
func holds(t *testing.T, alg quota.ByteRateAlgorithm, what string, m, ref *meter, from, to int, tol float64) {
	t.Helper()
	want := simQ * float64(to-from)
	if alg == quota.ByteRateTokenBucket {
		within(t, what, m.sum(from, to), want, tol)
		return
	}
	got, one := m.sum(from, to), ref.sum(from, to)
	t.Logf("%s: %.3f × Q; one broker alone: %.3f × Q", what, got/want, one/want)
	if got > want*(1+tol) || got < one*(1-tol) {
		t.Errorf("%s: %.3f × Q, want at most %.2f and at least one broker's %.3f less %.0f %%", what, got/want, 1+tol, one/want, tol*100)
	}
}

// TestShareUneven: one client with 1, 4 and 1 connections on three
// instances gets Q in total — within ±5 % over 30 s after the start-up
// burst — and its start-up burst is Q·(N−1)·W once, as one broker gives
// it, not once per instance.
func TestShareUneven(t *testing.T) {
	t.Parallel()
	for _, alg := range algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			ref := alone(t, alg, 6, 45*time.Second)
			synctest.Test(t, func(t *testing.T) {
				c := newSimCluster(t, 3, alg, simQ)
				defer c.stopAll()
				time.Sleep(3 * c.interval) // the instances know each other
				m := &meter{start: time.Now()}
				until := time.Now().Add(45 * time.Second)
				var wg sync.WaitGroup
				for i, n := range []int{1, 4, 1} {
					for range n {
						connOn(&wg, m, c.inst[i], until)
					}
				}
				wg.Wait()
				// The first 10 s hold the burst: as much as one broker
				// admits to the same six connections (Kafka's sampled rate
				// within 15 %: its throttle lets the lag of a report through).
				tol := 0.05
				if alg == quota.ByteRateSampled {
					tol = 0.15
				}
				within(t, "first 10 s, against one broker's", m.sum(0, 10), ref.sum(0, 10), tol)
				holds(t, alg, "30 s after the burst", m, ref, 15, 45, 0.05)
			})
		})
	}
}

// TestShareAloneIsPerInstance is the comparison the cluster exists for:
// three instances that do not exchange (each counts alone) give the same
// client about 3 × Q.
func TestShareAloneIsPerInstance(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ins []*simInstance
		for range 3 {
			e, _ := quota.NewEngine(quota.EngineConfig{SharedDeadline: true, ByteRate: quota.ByteRateTokenBucket})
			var qs model.Quotas
			qs.Set(model.ClientEntity(model.Exact("tenant")), model.ProducerByteRate, simQ)
			e.SetQuotas(qs)
			ins = append(ins, &simInstance{e: e})
		}
		m := &meter{start: time.Now()}
		until := time.Now().Add(45 * time.Second)
		var wg sync.WaitGroup
		for i, n := range []int{1, 4, 1} {
			for range n {
				connOn(&wg, m, ins[i], until)
			}
		}
		wg.Wait()
		within(t, "30 s after the burst, counted per instance", m.sum(15, 45), 3*simQ*30, 0.05)
	})
}

// TestShareConnectionsMove: midway, the client's connections move from one
// instance to another (a load balancer rebalancing, a client reconnecting);
// the total stays Q.
func TestShareConnectionsMove(t *testing.T) {
	t.Parallel()
	for _, alg := range algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			ref := alone(t, alg, 3, 50*time.Second)
			synctest.Test(t, func(t *testing.T) {
				c := newSimCluster(t, 3, alg, simQ)
				defer c.stopAll()
				time.Sleep(3 * c.interval)
				start := time.Now()
				m := &meter{start: start}
				until := start.Add(50 * time.Second)
				moved := start.Add(30 * time.Second)
				var wg sync.WaitGroup
				// Two connections on instance 0 that move to 2, one on 1 that
				// moves to 0.
				where := func(before, after int) func() *simInstance {
					return func() *simInstance {
						if time.Now().Before(moved) {
							return c.inst[before]
						}
						return c.inst[after]
					}
				}
				for _, w := range []func() *simInstance{where(0, 2), where(0, 2), where(1, 0)} {
					wg.Go(func() { conn(m, w, until, nil) })
				}
				wg.Wait()
				holds(t, alg, "30 s around the move", m, ref, 15, 45, 0.05)
			})
		})
	}
}

// TestShareInstanceDies: an instance dies without a word (kill -9); its
// connections reconnect to the others, which take its part back — the
// total stays at Q, and the dead one leaves the membership after the
// session timeout.
func TestShareInstanceDies(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 3, quota.ByteRateTokenBucket, simQ)
		defer func() {
			for _, i := range []int{0, 1} {
				c.inst[i].cancel()
				<-c.inst[i].done
			}
		}()
		time.Sleep(3 * c.interval)
		start := time.Now()
		m := &meter{start: start}
		until := start.Add(50 * time.Second)
		dies := start.Add(25 * time.Second)
		var wg sync.WaitGroup
		for i := range 3 {
			for range 2 {
				wg.Go(func() {
					conn(m, func() *simInstance {
						if i == 2 && !time.Now().Before(dies) {
							return c.inst[0] // reconnected elsewhere
						}
						return c.inst[i]
					}, until, nil)
				})
			}
		}
		time.Sleep(time.Until(dies))
		c.stop(2)
		time.Sleep(c.x(0).SessionTimeout() + 2*c.interval)
		if n := len(c.x(0).Members()); n != 2 {
			t.Errorf("after the session timeout instance 0 lists %d members, want 2", n)
		}
		wg.Wait()
		within(t, "30 s around the death", m.sum(15, 45), simQ*30, 0.05)
		within(t, "the 20 s after it", m.sum(27, 47), simQ*20, 0.05)
	})
}

func (c *simCluster) x(i int) *Exchange { return c.inst[i].x }

// TestShareLossAndDelay: a tenth of the reports lost and up to 300 ms of
// delay: the total stays within the bound, a little under Q rather than
// over (a lost report is usage the others never learn of, so they admit a
// little more — see docs/cluster.md for the bound).
func TestShareLossAndDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 5, quota.ByteRateTokenBucket, simQ)
		c.net.mu.Lock()
		c.net.loss, c.net.delay, c.net.jit = 0.10, 100*time.Millisecond, 200*time.Millisecond
		c.net.mu.Unlock()
		defer c.stopAll()
		time.Sleep(3 * c.interval)
		m := &meter{start: time.Now()}
		until := time.Now().Add(45 * time.Second)
		var wg sync.WaitGroup
		for i := range 5 {
			connOn(&wg, m, c.inst[i], until)
		}
		wg.Wait()
		within(t, "30 s with 10 % loss", m.sum(15, 45), simQ*30, 0.10)
	})
}

// TestShareShiftingDemand: ten instances, the client's load shifting from
// one group of instances to another every 10 s; each phase stays at Q.
func TestShareShiftingDemand(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 10, quota.ByteRateTokenBucket, simQ)
		defer c.stopAll()
		time.Sleep(3 * c.interval)
		start := time.Now()
		m := &meter{start: start}
		var wg sync.WaitGroup
		// Phase p (10 s each) runs connections on instances p, p+3, p+6.
		for p := range 4 {
			from := start.Add(time.Duration(p) * 10 * time.Second)
			for _, i := range []int{p, p + 3, p + 6} {
				in := c.inst[i]
				wg.Go(func() {
					time.Sleep(time.Until(from))
					conn(m, func() *simInstance { return in }, from.Add(10*time.Second), nil)
				})
			}
		}
		wg.Wait()
		within(t, "phases 2 to 4", m.sum(12, 40), simQ*28, 0.05)
	})
}

// TestShareCutOff: an instance cut off from the exchange never becomes
// unlimited: its share moves from what it last had toward Q/N, so its
// connections get about Q/N while the others, which see it gone, hold
// theirs to Q — the total during a partition stays under Q·(1 + 1/N).
func TestShareCutOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 3, quota.ByteRateTokenBucket, simQ)
		defer c.stopAll()
		time.Sleep(3 * c.interval)
		start := time.Now()
		lone := &meter{start: start}
		rest := &meter{start: start}
		until := start.Add(90 * time.Second)
		var wg sync.WaitGroup
		for i := range 3 {
			m := rest
			if i == 2 {
				m = lone
			}
			connOn(&wg, m, c.inst[i], until)
		}
		time.Sleep(20 * time.Second)
		c.inst[2].node.cut.Store(true)
		time.Sleep(c.x(2).SessionTimeout() + c.interval)
		if c.x(2).Connected() {
			t.Error("the cut-off instance still thinks it hears the exchange")
		}
		wg.Wait()
		// Long after the cut (5 time constants), the lone instance has Q/3.
		within(t, "the cut-off instance, 60–90 s", lone.sum(60, 90), simQ/3*30, 0.10)
		within(t, "the others, 60–90 s", rest.sum(60, 90), simQ*30, 0.05)
		if got := lone.sum(25, 90); got > simQ*65 {
			t.Errorf("the cut-off instance admitted %.1f × Q in 65 s: unlimited", got/simQ)
		}
	})
}

// TestShareRestart: an instance restarts (empty engine, new incarnation);
// the others see the restart and the total stays near Q.
func TestShareRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 3, quota.ByteRateTokenBucket, simQ)
		defer c.stopAll()
		time.Sleep(3 * c.interval)
		start := time.Now()
		m := &meter{start: start}
		until := start.Add(50 * time.Second)
		var cur atomic.Pointer[simInstance]
		cur.Store(c.inst[1])
		var wg sync.WaitGroup
		wg.Go(func() { conn(m, func() *simInstance { return c.inst[0] }, until, nil) })
		wg.Go(func() { conn(m, func() *simInstance { return cur.Load() }, until, nil) })
		time.Sleep(25 * time.Second)
		c.stop(1)
		c.inst[1] = c.start("i1")
		cur.Store(c.inst[1])
		wg.Wait()
		// The restarted instance's engine forgot the window; what it
		// admits before the others' reports reach it is bounded by one
		// lease (its floor of two intervals of Q at most once).
		within(t, "30 s around the restart", m.sum(15, 45), simQ*30, 0.06)
	})
}

// TestShareTenantCeiling: a tenant's ceiling C held across three
// instances — six principals of one tenant, each with a quota of its own
// far above C, their connections spread 1/3/2 over the instances (one
// principal on two instances): the tenant gets C within ±5 % over 30 s
// after its burst, and each principal its fair share C/6 within ±15 %,
// wherever its connections are. The ceiling's and the shares' usage
// travel in the same reports as the client buckets'.
func TestShareTenantCeiling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newSimCluster(t, 3, quota.ByteRateTokenBucket, 100*simQ)
		defer c.stopAll()
		users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
		ts, err := quota.NewTenantSet([]quota.Tenant{{Name: "team", Principals: users,
			Ceilings: map[model.Key]float64{model.ProducerByteRate: simQ}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range c.inst {
			var qs model.Quotas
			qs.Set(model.UserEntity(model.Default()), model.ProducerByteRate, 100*simQ)
			in.e.SetQuotas(qs)
			in.e.SetTenants(ts, time.Now())
		}
		time.Sleep(3 * c.interval)
		start := time.Now()
		total := &meter{start: start}
		per := map[string]*meter{}
		for _, u := range users {
			per[u] = &meter{start: start}
		}
		until := start.Add(45 * time.Second)
		var wg sync.WaitGroup
		for _, p := range []struct {
			user string
			on   int
		}{{"u0", 0}, {"u1", 1}, {"u2", 1}, {"u3", 1}, {"u4", 2}, {"u5", 2}, {"u5", 0}} {
			in := c.inst[p.on]
			wg.Go(func() { userConn(total, per[p.user], in, p.user, until) })
		}
		wg.Wait()
		within(t, "the tenant, 30 s after the burst", total.sum(15, 45), simQ*30, 0.05)
		for _, u := range users {
			within(t, u+"'s fair share", per[u].sum(15, 45), simQ*30/6, 0.15)
		}
	})
}

// userConn is conn for one principal of a tenant: 16 KiB requests, each
// recorded when answered (1 ms later), then muted for the throttle.
func userConn(total, own *meter, in *simInstance, user string, until time.Time) {
	const size = 16 << 10
	cl := in.e.Client(user, "app")
	for time.Now().Before(until) {
		now := time.Now()
		t := cl.RecordProduce(size, now)
		total.add(now, size)
		own.add(now, size)
		time.Sleep(max(t, time.Millisecond))
	}
}
