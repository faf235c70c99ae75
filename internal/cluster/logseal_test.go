package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/store"
)

// The signed configuration log against kfake: what one who can write the
// topic but holds no secret can do to a signed Tollgate cluster.

func signedWith(k *Keyring) func(*LogConfig) {
	return func(c *LogConfig) { c.Keys, c.Secret = k, store.SecretLogKey }
}

// topicRecords reads the whole configuration topic as it is on the broker.
func topicRecords(t *testing.T, seeds []string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"_tollgate-t-config": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := endOf(t, cl)
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(out), end)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func endOf(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	lg := &Log{cfg: LogConfig{Topic: "_tollgate-t-config", Timeout: 5 * time.Second}, adm: kadm.NewClient(cl)}
	end, err := lg.endOffset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// produceRaw writes records straight to the topic, as a tenant holding
// broker credentials could.
func produceRaw(t *testing.T, seeds []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("_tollgate-t-config"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		r.Partition = 0
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func sigOf(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == SigHeader {
			return h.Value
		}
	}
	return nil
}

func setQuota(t *testing.T, n *node, v float64) {
	t.Helper()
	if err := n.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: v}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestLogSigned: every record is signed and secrets are sealed; a forged
// API key (unsigned, or under a genuine record's signature), and a
// genuine old record copied back in, are refused and counted — by the
// instances following the topic and by one reading it from the start —
// and the log goes on taking changes.
func TestLogSigned(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	seeds := c.ListenAddrs()
	k := keyring(t, KeyringConfig{Secret: secretA})
	a := startNodeWith(t, seeds, t.TempDir(), signedWith(k))
	b := startNodeWith(t, seeds, t.TempDir(), signedWith(k))

	hash := []byte("HASH-0123456789-of-the-api-key-k1")
	if err := a.st.PutAPIKeyFunc(store.APIKey{ID: "k1", Identity: "User:svc", Hash: hash}, nil); err != nil {
		t.Fatal(err)
	}
	cred := "SALTED-STORED-KEY-of-alice"
	if _, err := a.st.AlterScramFunc([]store.ScramChange{{User: "alice", Mechanism: "SCRAM-SHA-256", Credential: cred}}, nil); err != nil {
		t.Fatal(err)
	}
	setQuota(t, a, 1000)
	eventually(t, "b applies a's API key", func() bool { got, ok, _ := b.st.APIKey("k1"); return ok && bytes.Equal(got.Hash, hash) })
	eventually(t, "b applies a's quota", func() bool { v, _ := quotaOf(t, b.st, "producer_byte_rate"); return v == 1000 })
	if got, ok, _ := b.st.ScramCredential("alice", "SCRAM-SHA-256"); !ok || got != cred {
		t.Fatalf("b's SCRAM credential: %q %v", got, ok)
	}

	var apiKeyRec, quotaRec *kgo.Record
	for _, r := range topicRecords(t, seeds) {
		if sigOf(r) == nil {
			t.Errorf("record at %d is not signed", r.Offset)
		}
		if bytes.Contains(r.Value, hash) || bytes.Contains(r.Value, []byte(cred)) {
			t.Errorf("record at %d holds a secret in the clear: %q", r.Offset, r.Value)
		}
		switch {
		case bytes.HasSuffix(r.Key, []byte("k1")):
			apiKeyRec = r
		case !store.SecretLogKey(r.Key):
			quotaRec = r
		}
	}
	if apiKeyRec == nil || quotaRec == nil {
		t.Fatal("the API key's or the quota's record is not in the topic")
	}
	plain, refused := k.VerifyRecord(apiKeyRec.Key, apiKeyRec.Value, sigOf(apiKeyRec))
	if refused != "" {
		t.Fatal(refused)
	}

	// The attacker's API key "ev", for the quota admin, with the value a
	// genuine record holds in the clear.
	evKey := append(bytes.TrimSuffix(bytes.Clone(apiKeyRec.Key), []byte("k1")), "ev"...)
	evValue := bytes.Replace(plain.Value, []byte(`"k1"`), []byte(`"ev"`), 1)
	setQuota(t, a, 2000) // the quota record above is now an old one
	produceRaw(t, seeds,
		&kgo.Record{Key: evKey, Value: evValue},
		&kgo.Record{Key: evKey, Value: apiKeyRec.Value, Headers: apiKeyRec.Headers}, // a genuine signature, another key
		&kgo.Record{Key: quotaRec.Key, Value: quotaRec.Value, Headers: quotaRec.Headers},
	)
	setQuota(t, a, 3000) // the log goes on: this append is read past the refused records
	eventually(t, "b applies the change after the forgeries", func() bool { v, _ := quotaOf(t, b.st, "producer_byte_rate"); return v == 3000 })
	if _, ok, _ := b.st.APIKey("ev"); ok {
		t.Fatal("b applied the forged API key")
	}
	want := map[string]uint64{RefusedUnsigned: 1, RefusedBadSignature: 1, RefusedStale: 1}
	for _, n := range []*node{a, b} {
		if got := n.lg.Status().Refused; !equalCounts(got, want) {
			t.Errorf("refusals %v, want %v", got, want)
		}
	}
	// An instance that reads the topic from its start refuses them too.
	c2 := startNodeWith(t, seeds, t.TempDir(), signedWith(k))
	if _, ok, _ := c2.st.APIKey("ev"); ok {
		t.Fatal("a new instance applied the forged API key")
	}
	if v, _ := quotaOf(t, c2.st, "producer_byte_rate"); v != 3000 {
		t.Fatalf("a new instance has quota %v, want 3000", v)
	}
	if got := c2.lg.Status().Refused; !equalCounts(got, want) {
		t.Errorf("new instance's refusals %v, want %v", got, want)
	}
}

func equalCounts(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestLogSignedAfterAClockAhead: a record signed by an instance whose
// clock is an hour ahead does not make later changes of the same key
// look stale: an instance signs after the latest record it has seen.
func TestLogSignedAfterAClockAhead(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	seeds := c.ListenAddrs()
	k := keyring(t, KeyringConfig{Secret: secretA})
	a := startNodeWith(t, seeds, t.TempDir(), signedWith(k))
	setQuota(t, a, 1000)
	var quotaRec *kgo.Record
	for _, r := range topicRecords(t, seeds) {
		quotaRec = r
	}
	v, _ := k.VerifyRecord(quotaRec.Key, quotaRec.Value, sigOf(quotaRec))
	// The same value, signed an hour ahead of this clock.
	stored, sig := k.SignRecord(quotaRec.Key, v.Value, false, time.Now().Add(time.Hour).UnixMilli())
	produceRaw(t, seeds, &kgo.Record{Key: quotaRec.Key, Value: stored, Headers: []kgo.RecordHeader{{Key: SigHeader, Value: sig}}})
	if err := a.lg.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	setQuota(t, a, 2000)
	if got, _ := quotaOf(t, a.st, "producer_byte_rate"); got != 2000 {
		t.Fatalf("quota %v after a change that followed a record from the future", got)
	}
	if r := a.lg.Status().Refused; len(r) != 0 {
		t.Fatalf("refused %v", r)
	}
}

// TestLogRotation: an instance with a new secret accepts the previous
// one's records during the grace and signs them again, so that an
// instance that holds only the new secret reads the whole state; once
// the grace is over the previous secret is refused.
func TestLogRotation(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	seeds := c.ListenAddrs()
	old := keyring(t, KeyringConfig{Secret: secretA})
	a := startNodeWith(t, seeds, t.TempDir(), signedWith(old))
	setQuota(t, a, 7)
	if err := a.st.PutAPIKeyFunc(store.APIKey{ID: "k1", Identity: "User:svc", Hash: []byte("h")}, nil); err != nil {
		t.Fatal(err)
	}
	a.stop()

	rotated := keyring(t, KeyringConfig{Secret: secretB, Previous: secretA, GraceUntil: time.Now().Add(time.Hour)})
	b := startNodeWith(t, seeds, t.TempDir(), signedWith(rotated))
	if v, _ := quotaOf(t, b.st, "producer_byte_rate"); v != 7 {
		t.Fatalf("the rotated instance has quota %v, want 7", v)
	}
	eventually(t, "every record signed again", func() bool { b.lg.mu.Lock(); defer b.lg.mu.Unlock(); return len(b.lg.resign) == 0 })

	only := keyring(t, KeyringConfig{Secret: secretB})
	n := startNodeWith(t, seeds, t.TempDir(), signedWith(only))
	if v, _ := quotaOf(t, n.st, "producer_byte_rate"); v != 7 {
		t.Fatalf("an instance with the new secret only has quota %v, want 7", v)
	}
	if _, ok, _ := n.st.APIKey("k1"); !ok {
		t.Fatal("an instance with the new secret only lacks the API key")
	}
	if r := n.lg.Status().Refused; r[RefusedUnknownKey] != 2 {
		t.Errorf("the old records (kfake does not compact): refused %v, want 2 unknown_key", r)
	}

	expired := keyring(t, KeyringConfig{Secret: secretB, Previous: secretA, GraceUntil: time.Now().Add(-time.Second)})
	e := startNodeWith(t, seeds, t.TempDir(), signedWith(expired))
	if r := e.lg.Status().Refused; r[RefusedExpiredKey] != 2 {
		t.Errorf("after the grace: refused %v, want 2 expired_key", r)
	}
}

// TestLogMigration: an unsigned Tollgate cluster turns signing on — an
// instance that accepts unsigned records for the grace signs them again —
// and an instance without the secret then refuses what is signed.
func TestLogMigration(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	seeds := c.ListenAddrs()
	a := startNode(t, seeds, t.TempDir())
	setQuota(t, a, 5)
	a.stop()
	k := keyring(t, KeyringConfig{Secret: secretA, AcceptUnsigned: true, GraceUntil: time.Now().Add(time.Hour)})
	b := startNodeWith(t, seeds, t.TempDir(), signedWith(k))
	eventually(t, "signed again", func() bool { b.lg.mu.Lock(); defer b.lg.mu.Unlock(); return len(b.lg.resign) == 0 })
	strict := startNodeWith(t, seeds, t.TempDir(), signedWith(keyring(t, KeyringConfig{Secret: secretA})))
	if v, _ := quotaOf(t, strict.st, "producer_byte_rate"); v != 5 {
		t.Fatalf("after migrating: quota %v, want 5", v)
	}
	plain := startNode(t, seeds, t.TempDir())
	if _, ok := quotaOf(t, plain.st, "producer_byte_rate"); !ok {
		t.Fatal("the instance without a secret should still apply the unsigned original")
	}
	if r := plain.lg.Status().Refused; r[RefusedNoSecret] != 1 {
		t.Errorf("an instance without the secret: refused %v, want 1 no_secret", r)
	}
}
