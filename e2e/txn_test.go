package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Transactions through the gateway (InitProducerID, AddPartitionsToTxn,
// EndTxn, FindCoordinator for a transactional id, then AddOffsetsToTxn and
// TxnOffsetCommit in the consume-transform-produce part):
//
//   - a transactional producer commits a transaction, aborts one and commits
//     another; a read_committed consumer sees exactly the committed records
//     in order, a read_uncommitted one sees all of them, and the last
//     stable offset is the end of the log;
//   - a GroupTransactSession consumes the committed records, aborts its
//     first transaction (and is rewound to the last committed offsets),
//     then transforms everything into a second topic in committed
//     transactions; the output and the group's committed offsets are
//     exactly right.
//
// On the real cluster the transaction coordinator, the group coordinator
// and the partition leaders are real brokers (spread over the three), so
// FindCoordinator answers and NOT_COORDINATOR retries pass the gateway's
// address rewriting; topics, transactional ids and the group are the
// test's own (the cluster is shared).
func TestTransactions(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, transactions)
}

func transactions(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 90*time.Second)
	dialer := &testkit.Dialer{}
	const partitions, perTxn = 3, 20
	src, dst := up.Topic(t, "txn-src"), up.Topic(t, "txn-dst")
	freshTopics(t, up, src, dst)

	adm := kadm.NewClient(newClient(t, env, dialer))
	created, err := adm.CreateTopics(ctx, partitions, -1, nil, src, dst)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, topic := range []string{src, dst} {
		env.SpreadLeaders(t, topic, partitions)
	}

	prod := newClient(t, env, dialer,
		kgo.TransactionalID(up.Topic(t, "tollgate-txn-producer")),
		kgo.TransactionTimeout(10*time.Second),
		kgo.DefaultProduceTopic(src),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	txn := func(name string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatalf("begin %s: %v", name, err)
		}
		var recs []*kgo.Record
		for i := 0; i < perTxn; i++ {
			for p := int32(0); p < partitions; p++ {
				recs = append(recs, &kgo.Record{Partition: p, Key: []byte(name), Value: fmt.Appendf(nil, "%s-%d-%d", name, p, i)})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", name, err)
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end %s (commit=%v): %v", name, commit, err)
		}
	}
	txn("c1", kgo.TryCommit)
	txn("a2", kgo.TryAbort)
	txn("c3", kgo.TryCommit)

	// Each transaction is perTxn records and a control record per
	// partition, so the log ends at 3*(perTxn+1); once the last commit
	// marker is written the last stable offset is the end too.
	wantEnd := int64(3 * (perTxn + 1))
	var lso kadm.ListedOffsets
	stableBy := time.Now().Add(15 * time.Second)
	for {
		var err error
		lso, err = adm.ListCommittedOffsets(ctx, src)
		if err != nil {
			t.Fatalf("list committed offsets: %v", err)
		}
		stable := true
		lso.Each(func(o kadm.ListedOffset) { stable = stable && o.Err == nil && o.Offset == wantEnd })
		if stable && len(lso[src]) == partitions {
			break
		}
		if time.Now().After(stableBy) {
			t.Fatalf("last stable offsets %v, want %d for each of %d partitions", lso, wantEnd, partitions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ends, err := adm.ListEndOffsets(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != wantEnd {
			t.Errorf("end offset of %s/%d = %d, want %d", o.Topic, o.Partition, o.Offset, wantEnd)
		}
	})

	committed := txnReadAll(t, ctx, env, dialer, src, partitions*2*perTxn, kgo.ReadCommitted())
	txnCheckSeq(t, "read_committed "+src, committed, partitions, []string{"c1", "c3"}, "", perTxn)
	uncommitted := txnReadAll(t, ctx, env, dialer, src, partitions*3*perTxn, kgo.ReadUncommitted())
	txnCheckSeq(t, "read_uncommitted "+src, uncommitted, partitions, []string{"c1", "a2", "c3"}, "", perTxn)

	// Consume-transform-produce.
	group := up.GroupID(t, "txn-ctp")
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(env.Bootstrap),
		kgo.Dialer(dialer.DialContext),
		kgo.TransactionalID(up.Topic(t, "tollgate-txn-ctp")),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(src),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(dst),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	want := partitions * 2 * perTxn
	done, aborted, rounds := 0, 0, 0
	for ; done < want && rounds < 100; rounds++ {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("transformed %d of %d: %v", done, want, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, &kgo.Record{Partition: r.Partition, Key: r.Key, Value: append([]byte("T:"), r.Value...)})
		})
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			t.Fatalf("produce transformed: %v", err)
		}
		try := kgo.TryCommit
		if aborted == 0 {
			try = kgo.TryAbort // the first batch is aborted and must come again
		}
		ok, err := sess.End(ctx, try)
		if err != nil {
			t.Fatalf("end transaction (commit=%v): %v", try, err)
		}
		switch {
		case try == kgo.TryAbort && ok:
			t.Fatal("End(TryAbort) reported a commit")
		case try == kgo.TryAbort:
			aborted += len(out)
		case !ok:
			t.Logf("transaction of %d records aborted by the session (rebalance?); they will be redelivered", len(out))
		default:
			done += len(out)
		}
	}
	if done != want || aborted == 0 {
		t.Fatalf("after %d rounds: transformed %d of %d records in committed transactions, %d in the aborted one", rounds, done, want, aborted)
	}
	// franz-go commits the offset after the last record it consumed, the
	// last data record of c3, which the commit marker follows. The offsets
	// are asked for stable (KIP-447): a real group coordinator makes a
	// transaction's offsets visible once the commit markers reach
	// __consumer_offsets, after EndTxn has been answered (kfake at once);
	// until then a stable fetch answers UNSTABLE_OFFSET_COMMIT (retried
	// here, bounded) and an unstable one the offsets before.
	stableBy = time.Now().Add(15 * time.Second)
	for {
		offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		var wrong []string
		for p := int32(0); err == nil && p < partitions; p++ {
			if o, ok := offs.Lookup(src, p); !ok || o.Err != nil || o.At != wantEnd-1 {
				wrong = append(wrong, fmt.Sprintf("%s/%d: %+v", src, p, o))
			}
		}
		if err == nil && len(wrong) == 0 {
			break
		}
		if time.Now().After(stableBy) {
			t.Fatalf("group %s committed %v (%v), want %d for each partition", group, wrong, err, wantEnd-1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := txnReadAll(t, ctx, env, dialer, dst, want, kgo.ReadCommitted())
	txnCheckSeq(t, "read_committed "+dst, out, partitions, []string{"c1", "c3"}, "T:", perTxn)

	checkDialsGatewayOnly(t, "the clients", env, dialer.Addrs())
}

// txnReadAll reads topic from the start with a fresh client until it has n
// records, then polls once more briefly to catch any extra record.
func txnReadAll(t *testing.T, ctx context.Context, env *testkit.Env, d *testkit.Dialer, topic string, n int, iso kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	cl := newClient(t, env, d, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; len(recs) < n && i < 200; i++ {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(recs), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		recs = append(recs, fs.Records()...)
	}
	extra, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	recs = append(recs, cl.PollFetches(extra).Records()...)
	return recs
}

// txnCheckSeq checks that each partition holds exactly, in order, the records
// prefix+"<txn>-<p>-<i>" for each txn in txns and i < per.
func txnCheckSeq(t *testing.T, name string, recs []*kgo.Record, partitions int, txns []string, prefix string, per int) {
	t.Helper()
	got := map[int32][]string{}
	for _, r := range recs {
		got[r.Partition] = append(got[r.Partition], string(r.Value))
	}
	for p := int32(0); p < int32(partitions); p++ {
		var want []string
		for _, x := range txns {
			for i := 0; i < per; i++ {
				want = append(want, fmt.Sprintf("%s%s-%d-%d", prefix, x, p, i))
			}
		}
		if strings.Join(got[p], ",") != strings.Join(want, ",") {
			t.Errorf("%s partition %d: got %d records %v\nwant %d records %v", name, p, len(got[p]), got[p], len(want), want)
		}
	}
	if len(recs) != partitions*len(txns)*per {
		t.Errorf("%s: %d records, want %d", name, len(recs), partitions*len(txns)*per)
	}
}

// Transactions and idempotence across a throttle: a transactional producer
// and an idempotent one (franz-go's idempotent producer, one request in
// flight per broker: its only mode), both
// under a producer_byte_rate the gateway enforces (held and throttled:
// three times the burst is sent). Every committed record arrives exactly
// once and in order, the aborted transaction's never reach a
// read_committed consumer, and no producer meets OUT_OF_ORDER_SEQUENCE or a
// duplicate — the holds keep each connection's requests in order.
func TestTransactionsThrottled(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, transactionsThrottled)
}

func transactionsThrottled(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 120*time.Second)
	const partitions, perTxn, q = 3, 30, 24 << 10
	txnTopic, idemTopic := up.Topic(t, "txnq"), up.Topic(t, "idemq")
	freshTopics(t, up, txnTopic, idemTopic)
	adm := adminAs(t, env, "127.0.0.2")
	created, err := adm.CreateTopics(ctx, partitions, -1, nil, txnTopic, idemTopic)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, topic := range []string{txnTopic, idemTopic} {
		env.SpreadLeaders(t, topic, partitions)
	}
	cid := "txn-throttled"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &cid}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: q}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("quota: %v %+v", err, res)
	}
	// 1.5 KiB a record: the transactions pass the burst (ten seconds of q),
	// the idempotent producer then runs in the debt.
	pad := kgo.RecordHeader{Key: "pad", Value: make([]byte, 1536)}
	recs := func(name string) []*kgo.Record {
		var out []*kgo.Record
		for i := 0; i < perTxn; i++ {
			for p := int32(0); p < partitions; p++ {
				out = append(out, &kgo.Record{Partition: p, Key: []byte(name), Value: fmt.Appendf(nil, "%s-%d-%d", name, p, i), Headers: []kgo.RecordHeader{pad}})
			}
		}
		return out
	}

	txnHooks, idemHooks := &counted{}, &counted{}
	prod := newClient(t, env, nil, kgo.ClientID(cid), kgo.WithHooks(txnHooks),
		kgo.TransactionalID(up.Topic(t, "tollgate-txnq")), kgo.TransactionTimeout(60*time.Second),
		kgo.DefaultProduceTopic(txnTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for _, x := range []struct {
		name string
		end  kgo.TransactionEndTry
	}{{"c1", kgo.TryCommit}, {"a2", kgo.TryAbort}, {"c3", kgo.TryCommit}} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatalf("begin %s: %v", x.name, err)
		}
		if err := prod.ProduceSync(ctx, recs(x.name)...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", x.name, err)
		}
		if err := prod.EndTransaction(ctx, x.end); err != nil {
			t.Fatalf("end %s: %v", x.name, err)
		}
	}
	idem := newClient(t, env, nil, kgo.ClientID(cid), kgo.WithHooks(idemHooks),
		kgo.DefaultProduceTopic(idemTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(8<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := idem.ProduceSync(ctx, recs("i1")...).FirstErr(); err != nil {
		t.Fatalf("idempotent produce: %v", err)
	}
	if txnHooks.throttles.Load() == 0 || idemHooks.throttles.Load() == 0 {
		t.Errorf("throttles seen: transactional %d, idempotent %d; want both throttled", txnHooks.throttles.Load(), idemHooks.throttles.Load())
	}

	committed := txnReadAll(t, ctx, env, nil, txnTopic, partitions*2*perTxn, kgo.ReadCommitted())
	txnCheckSeq(t, "read_committed "+txnTopic, committed, partitions, []string{"c1", "c3"}, "", perTxn)
	all := txnReadAll(t, ctx, env, nil, idemTopic, partitions*perTxn, kgo.ReadUncommitted())
	txnCheckSeq(t, idemTopic, all, partitions, []string{"i1"}, "", perTxn)
}
