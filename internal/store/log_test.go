package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// memLog is the shared log reduced to its order: an append goes to every
// attached store in one sequence. The real log (internal/cluster) is
// tested against a Kafka cluster; this one tests what the store does with
// a log.
type memLog struct {
	mu     sync.Mutex
	recs   []LogRecord
	stores []*Store
	fail   error
}

func (l *memLog) CatchUp(context.Context) error { return nil }

func (l *memLog) Append(_ context.Context, recs []LogRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.recs = append(l.recs, recs...)
	for _, s := range l.stores {
		if err := s.ApplyLog(recs, int64(len(l.recs))); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) attach(s *Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.ReplaceLog("t", l.recs, int64(len(l.recs))); err != nil {
		panic(err)
	}
	l.stores = append(l.stores, s)
	s.SetLog(l)
}

// TestLogWritesThrough: with a log attached, a write reaches every store
// on the log, fires their change feeds, and returns results as without one.
func TestLogWritesThrough(t *testing.T) {
	t.Parallel()
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	lg := &memLog{}
	lg.attach(a)
	lg.attach(b)
	ch, cancel := b.Subscribe()
	defer cancel()
	e := MustEntity(Named(TypeUser, "alice"))
	rs, err := a.AlterClientQuotasFunc([]EntityChange{{Entity: e, Ops: []Op{set("producer_byte_rate", 1024)}}}, nil)
	if err != nil || !rs[0].Changed {
		t.Fatalf("alter: %+v %v", rs, err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("b's change feed did not fire")
	}
	for _, s := range []*Store{a, b} {
		if v := values(t, s, e); v["producer_byte_rate"] != 1024 {
			t.Fatalf("%v", v)
		}
	}
	if err := a.SetBrokerConfigs([]BrokerChange{{Broker: BrokerDefault(), Ops: []ConfigOp{{Key: "max.connections", Value: "10"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AlterScramFunc([]ScramChange{{User: "bob", Mechanism: "SCRAM-SHA-256", Credential: "c"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.PutAPIKeyFunc(APIKey{ID: "k1", Identity: "User:x", Hash: []byte{1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RevokeAPIKeyFunc("k1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutTenantFunc(Tenant{Name: "team-a", Principals: []string{"alice"}, Ceilings: map[string]float64{"producer_byte_rate": 1e6}}, CreateTenant, nil); err != nil {
		t.Fatal(err)
	}
	if tn, ok, err := b.Tenant("team-a"); err != nil || !ok || tn.Ceilings["producer_byte_rate"] != 1e6 || tn.Principals[0] != "alice" {
		t.Fatalf("b's tenant: %+v %v %v", tn, ok, err)
	}
	if _, err := b.DeleteTenantFunc("team-a", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Tenant("team-a"); ok {
		t.Fatal("a tenant deleted through b is still on a")
	}
	bc, _ := b.BrokerConfigs()
	cred, ok, _ := b.ScramCredential("bob", "SCRAM-SHA-256")
	k, _, _ := a.APIKey("k1")
	if len(bc) != 1 || bc[0].Values["max.connections"] != "10" || !ok || cred != "c" || !k.Revoked {
		t.Fatalf("b: %v %q %v; a's key %+v", bc, cred, ok, k)
	}
	// A refused write (the key exists) appends nothing.
	n := len(lg.recs)
	if err := b.PutAPIKeyFunc(APIKey{ID: "k1", Identity: "User:y", Hash: []byte{2}}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("put existing: %v", err)
	}
	if len(lg.recs) != n {
		t.Fatal("a refused write reached the log")
	}
}

// TestLogPerLeaf: two stores that change different keys of one entity
// both keep their change; the later of two changes to one key wins
// everywhere; removing the last key removes the entity everywhere.
func TestLogPerLeaf(t *testing.T) {
	t.Parallel()
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	lg := &memLog{}
	lg.attach(a)
	lg.attach(b)
	e := MustEntity(Named(TypeClientID, "c"))
	if err := a.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{set("producer_byte_rate", 1)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{set("consumer_byte_rate", 2)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{set("producer_byte_rate", 3)}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if v := values(t, s, e); len(v) != 2 || v["producer_byte_rate"] != 3 || v["consumer_byte_rate"] != 2 {
			t.Fatalf("%v", v)
		}
	}
	if err := a.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{remove("producer_byte_rate"), remove("consumer_byte_rate")}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if qs, _ := s.ClientQuotas(); len(qs) != 0 {
			t.Fatalf("entity left behind: %v", qs)
		}
	}
}

// TestLogFailureChangesNothing: a write the log refuses changes no store,
// and the error is the log's.
func TestLogFailureChangesNothing(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir())
	lg := &memLog{}
	lg.attach(a)
	lg.fail = errors.New("upstream unreachable")
	e := MustEntity(Named(TypeUser, "u"))
	if err := a.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{set("producer_byte_rate", 1)}}}); err == nil || err.Error() != "upstream unreachable" {
		t.Fatalf("alter: %v", err)
	}
	if v := values(t, a, e); len(v) != 0 {
		t.Fatalf("half applied: %v", v)
	}
}

// TestLogReplaceAndSeed: a store that was alone seeds a new log with all
// it has; once attached, a replacement deletes what the log lacks and a
// seed is no longer offered.
func TestLogReplaceAndSeed(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir())
	e := MustEntity(Named(TypeUser, "u"))
	if err := a.AlterClientQuotas([]EntityChange{{Entity: e, Ops: []Op{set("producer_byte_rate", 5)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutAPIKeyFunc(APIKey{ID: "k", Identity: "User:x", Hash: []byte{1}}, nil); err != nil {
		t.Fatal(err)
	}
	seed, err := a.LogSeed("t")
	if err != nil || len(seed) != 2 {
		t.Fatalf("seed: %d records, %v", len(seed), err)
	}
	// Another store takes the seed as the log's state.
	b := open(t, t.TempDir())
	if err := b.ReplaceLog("t", seed, 2); err != nil {
		t.Fatal(err)
	}
	if v := values(t, b, e); v["producer_byte_rate"] != 5 {
		t.Fatalf("%v", v)
	}
	if _, ok, _ := b.APIKey("k"); !ok {
		t.Fatal("key not seeded")
	}
	// a attaches to a log that has only the quota: the key goes.
	var quotaOnly []LogRecord
	for _, r := range seed {
		if bytes.Contains(r.Key, bucketQuotas) {
			quotaOnly = append(quotaOnly, r)
		}
	}
	if err := a.ReplaceLog("t", quotaOnly, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.APIKey("k"); ok {
		t.Fatal("replace kept a leaf the log lacks")
	}
	if v := values(t, a, e); v["producer_byte_rate"] != 5 {
		t.Fatalf("replace lost a leaf the log has: %v", v)
	}
	if s, _ := a.LogSeed("t"); s != nil {
		t.Fatalf("an attached store offers a seed: %d", len(s))
	}
	if topic, next, _ := a.LogNext(); topic != "t" || next != 1 {
		t.Fatalf("LogNext: %q %d", topic, next)
	}
}

// TestLogRejectsGarbage: a malformed record key is an error, a record of a
// bucket this build does not know is skipped.
func TestLogRejectsGarbage(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir())
	for _, k := range [][]byte{nil, {2}, {1}, {1, 200}, {1, 1, 'x', 5}, {1, 0, 0}} {
		if err := a.ApplyLog([]LogRecord{{Key: k, Value: []byte("v")}}, 1); err == nil {
			t.Fatalf("key %v accepted", k)
		}
	}
	future := logKey(leaf{top: []byte("a_future_bucket"), key: []byte("t1")})
	if err := a.ApplyLog([]LogRecord{{Key: future, Value: []byte("v")}}, 1); err != nil {
		t.Fatalf("unknown bucket: %v", err)
	}
	for _, l := range []leaf{{top: bucketAPIKeys, key: []byte("id")}, {top: bucketQuotas, nested: []byte{}, key: []byte("k")}, {top: bucketScram, nested: []byte("u"), key: []byte("m")}} {
		got, err := parseLogKey(logKey(l))
		if err != nil || !bytes.Equal(got.top, l.top) || !bytes.Equal(got.nested, l.nested) || (got.nested == nil) != (l.nested == nil) || !bytes.Equal(got.key, l.key) {
			t.Fatalf("round trip %+v: %+v %v", l, got, err)
		}
	}
}

func FuzzParseLogKey(f *testing.F) {
	f.Add(logKey(leaf{top: bucketQuotas, nested: []byte("e"), key: []byte("k")}))
	f.Fuzz(func(t *testing.T, k []byte) {
		l, err := parseLogKey(k)
		if err != nil {
			return
		}
		if !bytes.Equal(logKey(l), k) {
			t.Fatalf("%x parses to %+v which encodes to %x", k, l, logKey(l))
		}
	})
}

// TestTopicEntitiesDurable: per-topic quota entities (topic and
// topic-prefix, alone or with a user or a client-id-prefix) round-trip
// through the store, survive a reopen, and reach every store of a shared
// log.
func TestTopicEntitiesDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, t.TempDir())
	lg := &memLog{}
	lg.attach(a)
	lg.attach(b)
	es := []Entity{
		MustEntity(Named(TypeTopic, "orders")),
		MustEntity(Named(TypeTopicPrefix, "logs-")),
		MustEntity(Named(TypeUser, "alice"), Named(TypeTopic, "orders")),
		MustEntity(DefaultOf(TypeUser), Named(TypeTopicPrefix, "logs-")),
		MustEntity(Named(TypeClientIDPrefix, "etl-"), Named(TypeTopic, "orders")),
		MustEntity(Named(TypeUser, "orders")), // a user named like the topic is another entity
	}
	var changes []EntityChange
	for i, e := range es {
		changes = append(changes, EntityChange{Entity: e, Ops: []Op{set("producer_byte_rate", float64(1000+i))}})
	}
	if _, err := a.AlterClientQuotasFunc(changes, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		all, err := s.ClientQuotas()
		if err != nil || len(all) != len(es) {
			t.Fatalf("%d entities, %v", len(all), err)
		}
		for i, e := range es {
			if v := values(t, s, e); v["producer_byte_rate"] != float64(1000+i) {
				t.Errorf("%v: %v", e, v)
			}
		}
	}
	a.Close()
	re := open(t, dir)
	for i, e := range es {
		if v := values(t, re, e); v["producer_byte_rate"] != float64(1000+i) {
			t.Errorf("after reopen, %v: %v", e, v)
		}
	}
}
