//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	topic               = "soak"
	group               = "soak-group"
	throttledProducerID = "soak-throttled-producer"
	throttledConsumerID = "soak-throttled-consumer"
	saslUser            = "soak-user"
	saslPassword        = "soak-password"
)

// load drives the mixed load and counts what it did.
type load struct {
	o           options
	plain, sasl string

	produced, consumed      atomic.Int64 // bytes acknowledged / fetched
	throttles               atomic.Int64 // responses the clients saw throttle_time_ms > 0 in
	adminRounds             atomic.Int64
	churned, bare           atomic.Int64 // short-lived clients, bare connections
	idleOpened              atomic.Int64
	loginsOK, loginsRefused atomic.Int64
	rebalances              atomic.Int64
	errMu                   sync.Mutex
	errs                    map[string]int
	throttledIDsMu          sync.Mutex
	throttledBy             map[string]int64
}

func newLoad(o options, plain, sasl string) *load {
	return &load{o: o, plain: plain, sasl: sasl, errs: map[string]int{}, throttledBy: map[string]int64{}}
}

// fail counts an unexpected error of one kind and prints the first few.
func (l *load) fail(kind string, err error) {
	l.errMu.Lock()
	l.errs[kind]++
	n := l.errs[kind]
	l.errMu.Unlock()
	if n <= 3 || n%100 == 0 {
		fmt.Fprintf(os.Stderr, "%s %s error #%d: %v\n", time.Now().Format(time.TimeOnly), kind, n, err)
	}
}

func (l *load) errorCount() (total int, kinds string) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	var ks []string
	for k, n := range l.errs {
		total += n
		ks = append(ks, k+" "+strconv.Itoa(n))
	}
	sort.Strings(ks)
	return total, fmt.Sprint(ks)
}

// throttleHook counts the throttles a client is told of.
type throttleHook struct {
	l  *load
	id string
}

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.l.throttles.Add(1)
		h.l.throttledIDsMu.Lock()
		h.l.throttledBy[h.id]++
		h.l.throttledIDsMu.Unlock()
	}
}

func (l *load) client(clientID string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(l.plain), kgo.ClientID(clientID),
		kgo.WithHooks(throttleHook{l, clientID})}, opts...)...)
}

// setup creates the topic and the SCRAM user (through the gateway, which
// answers AlterUserScramCredentials itself).
func (l *load) setup(ctx context.Context) error {
	cl, err := l.client("soak-setup")
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A minute of retention on the topic itself (kfake runs its cleaner,
	// every log.cleaner.backoff.ms, only for topics that set one), in 4 MiB
	// segments (it frees whole segments only; the default is 100 MiB).
	retention, segment := "60000", "4194304"
	cfg := map[string]*string{"retention.ms": &retention, "segment.bytes": &segment}
	if _, err := adm.CreateTopic(ctx, 3, 1, cfg, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: saslUser, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: saslPassword}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("SCRAM user: %w", err)
	}
	return nil
}

// start launches every part of the load; each stops when ctx ends.
func (l *load) start(ctx context.Context, wg *sync.WaitGroup) {
	goes := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	for i := 0; i < l.o.producers; i++ {
		id := "soak-producer-" + strconv.Itoa(i)
		goes(func(ctx context.Context) { l.producer(ctx, id) })
	}
	goes(func(ctx context.Context) { l.producer(ctx, throttledProducerID) })
	goes(l.group)
	goes(func(ctx context.Context) {
		l.consumer(ctx, throttledConsumerID, kgo.ConsumerGroup("soak-throttled-group"))
	})
	goes(l.admin)
	goes(l.churn)
	goes(l.idle)
	goes(l.logins)
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// producer offers -produce-rate bytes a second in -record sized records,
// ten times a second.
func (l *load) producer(ctx context.Context, id string) {
	cl, err := l.client(id, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedBytes(4<<20), kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		l.fail("producer", err)
		return
	}
	defer cl.Close()
	// Random values: the batches are compressed (franz-go's default), and
	// the quotas count what crosses the wire.
	noise := make([]byte, 1<<20+l.o.recordSize)
	for i := range noise {
		noise[i] = byte(rand.Uint32())
	}
	per := max(1, l.o.produceRate/10/l.o.recordSize)
	every(ctx, 100*time.Millisecond, func() {
		for i := 0; i < per && ctx.Err() == nil; i++ {
			at := rand.IntN(1 << 20)
			// Produce blocks while the buffer is full: a throttled
			// producer offers what its quota lets through.
			cl.Produce(ctx, &kgo.Record{Value: noise[at : at+l.o.recordSize]}, func(r *kgo.Record, err error) {
				switch {
				case err == nil:
					l.produced.Add(int64(len(r.Value)))
				case !isCanceled(ctx, err):
					l.fail("produce", err)
				}
			})
		}
	})
}

// consumer reads until ctx ends, counting the bytes.
func (l *load) consumer(ctx context.Context, id string, opts ...kgo.Opt) {
	cl, err := l.client(id, append([]kgo.Opt{kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxBytes(4 << 20),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { l.rebalances.Add(1) })}, opts...)...)
	if err != nil {
		l.fail("consumer", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !isCanceled(ctx, err) {
				l.fail("fetch", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { l.consumed.Add(int64(len(r.Value))) })
	}
}

// group runs the consumer group and replaces its oldest member every
// -rejoin-every: the leaving member's LeaveGroup and the rebalance that
// follows are part of the churn.
func (l *load) group(ctx context.Context) {
	type member struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var members []member
	n := 0
	join := func() {
		mctx, cancel := context.WithCancel(ctx)
		m := member{cancel, make(chan struct{})}
		id := "soak-member-" + strconv.Itoa(n%16)
		n++
		go func() { defer close(m.done); l.consumer(mctx, id, kgo.ConsumerGroup(group)) }()
		members = append(members, m)
	}
	for i := 0; i < l.o.groupMembers; i++ {
		join()
	}
	every(ctx, l.o.rejoinEvery, func() {
		members[0].cancel()
		<-members[0].done
		members = members[1:]
		join()
	})
	for _, m := range members {
		m.cancel()
		<-m.done
	}
}

// admin runs one round of admin calls every -admin-every on one
// long-lived admin client.
func (l *load) admin(ctx context.Context) {
	cl, err := l.client("soak-admin")
	if err != nil {
		l.fail("admin", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	round := 0
	every(ctx, l.o.adminEvery, func() {
		if err := l.adminRound(ctx, adm, round); err != nil && !isCanceled(ctx, err) {
			l.fail("admin", err)
		}
		round++
		l.adminRounds.Add(1)
	})
}

func (l *load) adminRound(ctx context.Context, adm *kadm.Client, round int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t := "soak-admin-" + strconv.Itoa(round)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, t); err != nil {
		return fmt.Errorf("create %s: %w", t, err)
	}
	if rc, err := adm.DescribeTopicConfigs(ctx, t); err != nil {
		return fmt.Errorf("describe configs of %s: %w", t, err)
	} else if _, err := rc.On(t, nil); err != nil {
		return fmt.Errorf("describe configs of %s: %w", t, err)
	}
	if _, err := adm.DescribeBrokerConfigs(ctx); err != nil {
		return fmt.Errorf("describe broker configs: %w", err)
	}
	// A quota set, described and removed: the store and the engine keep
	// at most one such entity at a time.
	name := "soak-admin-quota-" + strconv.Itoa(round%20)
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}}
	if err := alterQuota(ctx, adm, entity, kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: float64(1<<20 + round)}); err != nil {
		return err
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: kmsg.QuotasMatchTypeAny}}); err != nil {
		return fmt.Errorf("describe client quotas: %w", err)
	}
	if err := alterQuota(ctx, adm, entity, kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: true}); err != nil {
		return err
	}
	if _, err := adm.ListGroups(ctx); err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if dg, err := adm.DescribeGroups(ctx, group); err != nil {
		return fmt.Errorf("describe group: %w", err)
	} else if err := dg.Error(); err != nil {
		return fmt.Errorf("describe group: %w", err)
	}
	if _, err := adm.DeleteTopic(ctx, t); err != nil {
		return fmt.Errorf("delete %s: %w", t, err)
	}
	return nil
}

func alterQuota(ctx context.Context, adm *kadm.Client, e kadm.ClientQuotaEntity, op kadm.AlterClientQuotaOp) error {
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: []kadm.AlterClientQuotaOp{op}}})
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("alter client quota %v: %w", op, err)
	}
	return nil
}

// churn opens -churn short-lived connections a second: even ones are
// clients that list the topics, produce one record and close; odd ones
// connect and close without a request.
func (l *load) churn(ctx context.Context) {
	sem := make(chan struct{}, 8)
	n := 0
	every(ctx, time.Duration(float64(time.Second)/l.o.churnPerSec), func() {
		i := n
		n++
		select {
		case sem <- struct{}{}:
		default:
			l.fail("churn", errors.New("8 short-lived connections already in progress; skipped one"))
			return
		}
		go func() {
			defer func() { <-sem }()
			if i%2 == 1 {
				c, err := net.DialTimeout("tcp", l.plain, 5*time.Second)
				if err != nil {
					l.fail("bare connection", err)
					return
				}
				c.Close()
				l.bare.Add(1)
				return
			}
			if err := l.shortClient(ctx, "soak-churn-"+strconv.Itoa(i/2%64)); err != nil && !isCanceled(ctx, err) {
				l.fail("short-lived client", err)
				return
			}
			l.churned.Add(1)
		}()
	})
	for range cap(sem) {
		sem <- struct{}{}
	}
}

func (l *load) shortClient(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cl, err := l.client(id, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).ListTopics(ctx); err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("churn")}).FirstErr()
}

// idle holds -idle connections (each after one ApiVersions, what a client
// does first) and replaces the oldest every -idle-rotate.
func (l *load) idle(ctx context.Context) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	open := func() {
		c, err := dialHello(l.plain)
		if err != nil {
			if !isCanceled(ctx, err) {
				l.fail("idle connection", err)
			}
			return
		}
		held = append(held, c)
		l.idleOpened.Add(1)
	}
	for len(held) < l.o.idleConns && ctx.Err() == nil {
		open()
	}
	every(ctx, l.o.idleRotateEvery, func() {
		if len(held) > 0 {
			held[0].Close()
			held = held[1:]
		}
		open()
	})
}

// dialHello connects and does one ApiVersions v3 round trip.
func dialHello(addr string) (net.Conn, error) {
	return benchkit.DialHello(addr, "", "tollgate-bench-soak", "soak-idle", 10*time.Second)
}

// logins logs in on the SASL listener every -sasl-every, alternately with
// the right password (then lists the topics) and a wrong one (which must
// be refused), from 64 rotating source addresses so the failed-login limit
// per address (20 a minute by default) is not what refuses them.
func (l *load) logins(ctx context.Context) {
	n := 0
	every(ctx, l.o.saslEvery, func() {
		good := n%2 == 0
		src := net.IPv4(127, 0, 1, byte(1+n/2%64))
		n++
		pass := saslPassword
		if !good {
			pass = "wrong-" + strconv.Itoa(rand.IntN(1000))
		}
		err := l.login(ctx, src, pass)
		switch {
		case isCanceled(ctx, err) && ctx.Err() != nil:
		case good && err == nil:
			l.loginsOK.Add(1)
		case !good && errors.Is(err, kerr.SaslAuthenticationFailed):
			l.loginsRefused.Add(1)
		case good:
			l.fail("SCRAM login", err)
		default:
			l.fail("wrong-password login", fmt.Errorf("want SASL_AUTHENTICATION_FAILED, got %v", err))
		}
	})
}

func (l *load) login(ctx context.Context, src net.IP, pass string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.sasl), kgo.ClientID("soak-login"), kgo.Dialer(d.DialContext),
		kgo.SASL(scram.Auth{User: saslUser, Pass: pass}.AsSha256Mechanism()))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	return err
}
