package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Tollgate keeps state in topics of the cluster it fronts (audit.topic,
// usage.topic, a Tollgate cluster's configuration and usage exchange
// topics). Tenants never reach them through the gateway: to a tenant they
// are topics it is not authorized for. The attacks below are made as the
// tenant alice (127.0.0.3) and, where it is the stronger claim, as
// Tollgate's quota admin (127.0.0.2); what Tollgate's topics hold is read
// straight from the embedded cluster, never through the gateway.

// ownTopics are the names of a test's audit.topic and usage.topic and of
// alice's own topic (the test's own on the shared real cluster).
type ownTopics struct{ audit, usage, tenant string }

var errTAF = kerr.TopicAuthorizationFailed

// startOwnTopics runs a gateway in front of up whose audit.topic and
// usage.topic are on the upstream; alice has a topic of her own.
func startOwnTopics(t *testing.T, up *testkit.Upstream) (*testkit.Env, context.Context, ownTopics) {
	t.Helper()
	o := ownTopics{up.Topic(t, "tollgate-audit"), up.Topic(t, "tollgate-usage"), up.Topic(t, "orders")}
	freshTopics(t, up, o.audit, o.usage, o.tenant)
	env := startControlOn(t, up, func(c *app.Config) {
		c.Audit.Topic = o.audit
		c.Usage.Topic = o.usage
	})
	ctx := ctxT(t, 60*time.Second)
	r, err := kadm.NewClient(alice(t, env)).CreateTopic(ctx, 1, -1, nil, o.tenant)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("alice creates her topic: %v", err)
	}
	return env, ctx, o
}

// alice is a franz-go client of the tenant alice.
func alice(t *testing.T, env *testkit.Env, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, env, nil, append([]kgo.Opt{kgo.Dialer(fromIP("127.0.0.3"))}, opts...)...)
}

// auditSomething makes Tollgate write one audit event (an alteration by
// its quota admin), so that the audit topic exists and holds it.
func auditSomething(t *testing.T, ctx context.Context, env *testkit.Env) {
	t.Helper()
	name := "audited"
	res, err := adminAs(t, env, "127.0.0.2").AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
}

// records reads every record of topic straight from the embedded cluster.
func records(t *testing.T, ctx context.Context, env *testkit.Env, topic string) []string {
	t.Helper()
	var ends kadm.ListedOffsets
	// A topic Tollgate just made reaches every broker of a real cluster a
	// moment later.
	eventually(t, 15*time.Second, "the end offsets of "+topic, func() error {
		var err error
		if ends, err = upstreamAdmin(t, env).ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	if want == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Key)+"="+string(r.Value)) })
	}
	return out
}

// topicID is a topic's id, read from the embedded cluster: an attacker
// may have learnt it some other way.
func topicID(t *testing.T, ctx context.Context, env *testkit.Env, topic string) [16]byte {
	t.Helper()
	td, err := upstreamAdmin(t, env).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}

// leaderOf dials, through the gateway, as alice, the broker port of the
// leader of topic's partition 0.
func leaderOf(t *testing.T, ctx context.Context, env *testkit.Env, topic string) *rawConn {
	t.Helper()
	md, err := kadm.NewClient(alice(t, env)).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return brokerAs(t, ctx, env, md.Topics[topic].Partitions[0].Leader, "127.0.0.3")
}

// brokerAs dials, through the gateway, from ip, the port of broker id.
func brokerAs(t *testing.T, ctx context.Context, env *testkit.Env, id int32, ip string) *rawConn {
	t.Helper()
	md, err := kadm.NewClient(alice(t, env)).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return dialRawVia(t, ctx, &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
	}
	t.Fatalf("no broker %d in the gateway's metadata", id)
	return nil
}

// bootstrapAs dials the gateway's bootstrap port as alice.
func bootstrapAs(t *testing.T, ctx context.Context, env *testkit.Env) *rawConn {
	t.Helper()
	return dialRawVia(t, ctx, &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}, env.Bootstrap)
}

func produceTo(v int16, parts map[string][]byte, order ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
	for _, n := range order {
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = n
		tp.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: parts[n]}}
		req.Topics = append(req.Topics, tp)
	}
	return req
}

// produceErrs maps each topic of a Produce answer to its partitions'
// errors.
func produceErrs(resp kmsg.Response) map[string][]int16 {
	out := map[string][]int16{}
	for _, tp := range resp.(*kmsg.ProduceResponse).Topics {
		for _, p := range tp.Partitions {
			out[tp.Topic] = append(out[tp.Topic], p.ErrorCode)
		}
	}
	return out
}

// A tenant produces to Tollgate's audit topic every way it can: a
// producer that would auto-create it, the same after Tollgate has created
// it, a raw request that skips metadata (with one of its own topics, to
// the right leader), the topic named by id (Produce v13), a 1 MiB request
// naming it first, and a 1 MiB request naming it after 512 KiB of records
// for its own topic (past what the gateway reads before streaming). It
// gets TOPIC_AUTHORIZATION_FAILED or a closed connection; its own
// partition is written; the audit topic holds exactly Tollgate's event.
func attackProduceOwnTopic(t *testing.T, up *testkit.Upstream) {
	env, ctx, o := startOwnTopics(t, up)
	prod := alice(t, env, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2))
	forged := &kgo.Record{Topic: o.audit, Value: []byte(`{"action":"alter_client_quotas","outcome":"applied","forged":true}`)}
	if err := prod.ProduceSync(ctx, forged).FirstErr(); !errors.Is(err, errTAF) {
		t.Fatalf("producing to the audit topic before it exists: %v, want %v", err, errTAF)
	}
	if td, err := upstreamAdmin(t, env).ListTopics(ctx); err != nil || td.Has(o.audit) {
		t.Fatalf("the producer's metadata request created the audit topic (%v)", err)
	}

	auditSomething(t, ctx, env)
	before := records(t, ctx, env, o.audit)
	if len(before) != 1 {
		t.Fatalf("the audit topic holds %d records, want Tollgate's one event", len(before))
	}
	forged.Topic = o.audit
	if err := prod.ProduceSync(ctx, forged).FirstErr(); !errors.Is(err, errTAF) {
		t.Fatalf("producing to the audit topic: %v, want %v", err, errTAF)
	}

	// Skipping metadata: one request for alice's topic and the audit
	// topic, to the leader of alice's partition.
	batch := map[string][]byte{o.tenant: adminRecordBatch([]byte("alice's own")), o.audit: adminRecordBatch(forged.Value)}
	resp := leaderOf(t, ctx, env, o.tenant).do(t, produceTo(9, batch, o.tenant, o.audit))
	if got := produceErrs(resp); !slices.Equal(got[o.tenant], []int16{0}) || !slices.Equal(got[o.audit], []int16{errTAF.Code}) {
		t.Errorf("raw Produce of orders and the audit topic: %v, want orders written and the audit topic refused", got)
	}

	// By id (Produce v13).
	v13 := produceTo(13, batch, o.audit)
	v13.Topics[0].Topic, v13.Topics[0].TopicID = "", topicID(t, ctx, env, o.audit)
	resp = bootstrapAs(t, ctx, env).do(t, v13)
	if tp := resp.(*kmsg.ProduceResponse).Topics; len(tp) != 1 || tp[0].TopicID != v13.Topics[0].TopicID || tp[0].Partitions[0].ErrorCode != errTAF.Code {
		t.Errorf("Produce v13 by the audit topic's id: %+v", tp)
	}

	// 1 MiB naming the audit topic first: the gateway has its name in
	// the head it reads before streaming.
	big := func(topics ...string) *kmsg.ProduceRequest {
		parts := map[string][]byte{}
		for _, n := range topics {
			parts[n] = bytes.Repeat([]byte{'x'}, 512<<10)
		}
		return produceTo(9, parts, topics...)
	}
	resp = bootstrapAs(t, ctx, env).do(t, big(o.audit, o.tenant))
	if got := produceErrs(resp); !slices.Equal(got[o.audit], []int16{errTAF.Code}) {
		t.Errorf("a 1 MiB Produce naming the audit topic first: %v", got)
	}
	// 1 MiB naming it after 512 KiB for orders: checked as it streams,
	// the connection closed before the broker has the whole request.
	rc := bootstrapAs(t, ctx, env)
	rc.send(big(o.tenant, o.audit)) // may fail: the gateway closes mid-frame
	if resp, err := rc.recv(big(o.tenant, o.audit)); err == nil {
		t.Errorf("a 1 MiB Produce naming the audit topic past the head was answered: %v", produceErrs(resp))
	}

	if after := records(t, ctx, env, o.audit); !slices.Equal(after, before) {
		t.Errorf("the audit topic changed:\n%q\nwas\n%q", after, before)
	}
	if got := records(t, ctx, env, o.tenant); len(got) != 1 || got[0] != "=alice's own" {
		t.Errorf("orders holds %q, want alice's one record (the streamed request was never handled)", got)
	}
}

// A tenant reads Tollgate's audit topic every way it can: a consumer, a
// raw Fetch by name and by id (an attacker who learnt the id), a share
// group's ShareFetch, and the partition offsets. It gets
// TOPIC_AUTHORIZATION_FAILED and not one record; its own topic is consumed
// through the same gateway.
func attackFetchOwnTopic(t *testing.T, up *testkit.Upstream) {
	env, ctx, o := startOwnTopics(t, up)
	auditSomething(t, ctx, env)
	if len(records(t, ctx, env, o.audit)) != 1 {
		t.Fatal("the audit topic does not hold Tollgate's event")
	}
	id := topicID(t, ctx, env, o.audit)

	cons := alice(t, env, kgo.ConsumeTopics(o.audit), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	fs := cons.PollFetches(pctx)
	cancel()
	if fs.NumRecords() != 0 {
		t.Fatalf("a consumer of the audit topic read %d records", fs.NumRecords())
	}
	var denied bool
	fs.EachError(func(_ string, _ int32, err error) { denied = denied || errors.Is(err, errTAF) })
	if !denied {
		t.Errorf("a consumer of the audit topic got %v, want %v", fs.Errors(), errTAF)
	}

	fetch := func(v int16) *kmsg.FetchRequest {
		req := fetchOne(o.audit, 0, 0)
		req.Version, req.MaxWaitMillis, req.SessionEpoch = v, 100, -1
		if v >= 13 {
			req.Topics[0].Topic, req.Topics[0].TopicID = "", id
		}
		return req
	}
	for _, v := range []int16{4, 12, 13, 16} {
		resp := bootstrapAs(t, ctx, env).do(t, fetch(v)).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("Fetch v%d of the audit topic: %+v", v, resp.Topics)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != errTAF.Code || len(p.RecordBatches) != 0 || p.HighWatermark != -1 {
			t.Errorf("Fetch v%d of the audit topic: error %d, %d bytes of records, high watermark %d", v, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
		}
	}

	sf := kmsg.NewPtrShareFetchRequest()
	sf.Version, sf.GroupID, sf.MemberID, sf.MaxWaitMillis, sf.MaxBytes = 1, kmsg.StringPtr("thieves"), kmsg.StringPtr("m"), 100, 1<<20
	sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	av := bootstrapAs(t, ctx, env).do(t, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == int16(kmsg.ShareFetch) }) {
		// Kafka 3.9 has no share groups, and the gateway does not
		// advertise what the broker lacks: the broker closes a
		// connection that sends it anyway. Nothing of the topic comes.
		if resp, err := bootstrapAs(t, ctx, env).roundTrip(sf); err == nil {
			t.Errorf("ShareFetch to a broker without share groups was answered: %+v", resp)
		}
	} else {
		sresp := bootstrapAs(t, ctx, env).do(t, sf).(*kmsg.ShareFetchResponse)
		var sawAudit bool
		for _, tp := range sresp.Topics {
			for _, p := range tp.Partitions {
				if tp.TopicID == id {
					sawAudit = true
					if p.ErrorCode != errTAF.Code || len(p.Records) != 0 {
						t.Errorf("ShareFetch of the audit topic: error %d, %d bytes of records", p.ErrorCode, len(p.Records))
					}
				}
			}
		}
		if !sawAudit {
			t.Errorf("ShareFetch of the audit topic: no answer for it (%+v)", sresp)
		}
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 7, -1
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: o.audit, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}
	lr := bootstrapAs(t, ctx, env).do(t, lo).(*kmsg.ListOffsetsResponse)
	if p := lr.Topics[0].Partitions[0]; p.ErrorCode != errTAF.Code || p.Offset != -1 {
		t.Errorf("ListOffsets of the audit topic: error %d, offset %d", p.ErrorCode, p.Offset)
	}

	// Alice's own topic is consumed through the same gateway (Fetch by
	// id, read in place, forwarded).
	if err := alice(t, env).ProduceSync(ctx, &kgo.Record{Topic: o.tenant, Value: []byte("mine")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	own := alice(t, env, kgo.ConsumeTopics(o.tenant), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := own.PollFetches(ctx); fs.NumRecords() != 1 || fs.Err() != nil {
		t.Errorf("alice's own topic: %d records, %v", fs.NumRecords(), fs.Err())
	}
}

// A tenant lists the cluster's topics every way it can: every topic
// (Metadata, DescribeTopicPartitions) shows none of Tollgate's; one named
// (by name or by id) is refused, without its id or partitions; its
// configs are refused.
func attackListOwnTopics(t *testing.T, up *testkit.Upstream) {
	env, ctx, o := startOwnTopics(t, up)
	auditSomething(t, ctx, env)
	adm := kadm.NewClient(alice(t, env))
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if all.Has(o.audit) || all.Has(o.usage) || !all.Has(o.tenant) {
		t.Errorf("alice lists %v, want orders and none of Tollgate's topics", all.Names())
	}
	if _, err := adm.ListTopics(ctx, o.audit, o.usage); !errors.Is(err, errTAF) {
		t.Errorf("describing Tollgate's topics: %v, want %v", err, errTAF)
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(o.usage)}, {Topic: kmsg.StringPtr(o.tenant)}}
	mr := bootstrapAs(t, ctx, env).do(t, md).(*kmsg.MetadataResponse)
	for _, tp := range mr.Topics {
		if str(tp.Topic) == o.usage && (tp.ErrorCode != errTAF.Code || tp.TopicID != ([16]byte{}) || len(tp.Partitions) != 0) {
			t.Errorf("Metadata of the usage topic: %+v, want %v and nothing of it", tp, errTAF)
		}
		if str(tp.Topic) == o.tenant && (tp.ErrorCode != 0 || len(tp.Partitions) != 1) {
			t.Errorf("Metadata of orders: %+v", tp)
		}
	}
	if len(mr.Topics) != 2 || len(mr.Brokers) == 0 {
		t.Errorf("Metadata of the usage topic and orders: %d topics, %d brokers", len(mr.Topics), len(mr.Brokers))
	}
	md.Topics = []kmsg.MetadataRequestTopic{{TopicID: topicID(t, ctx, env, o.audit)}}
	mr = bootstrapAs(t, ctx, env).do(t, md).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != errTAF.Code || mr.Topics[0].Topic != nil || len(mr.Topics[0].Partitions) != 0 {
		t.Errorf("Metadata by the audit topic's id: %+v", mr.Topics)
	}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 2000
	dr := bootstrapAs(t, ctx, env).do(t, dtp).(*kmsg.DescribeTopicPartitionsResponse)
	var listed []string
	for _, tp := range dr.Topics {
		listed = append(listed, str(tp.Topic))
	}
	if slices.Contains(listed, o.audit) || slices.Contains(listed, o.usage) || !slices.Contains(listed, o.tenant) {
		t.Errorf("DescribeTopicPartitions of every topic lists %v", listed)
	}
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: o.usage}, {Topic: o.tenant}}
	dr = bootstrapAs(t, ctx, env).do(t, dtp).(*kmsg.DescribeTopicPartitionsResponse)
	for _, tp := range dr.Topics {
		if str(tp.Topic) == o.usage && (tp.ErrorCode != errTAF.Code || tp.TopicID != ([16]byte{}) || len(tp.Partitions) != 0) {
			t.Errorf("DescribeTopicPartitions of the usage topic: %+v", tp)
		}
	}

	if _, err := adm.DescribeTopicConfigs(ctx, o.audit); !errors.Is(err, errTAF) {
		t.Errorf("the audit topic's configs: %v, want %v", err, errTAF)
	}
	if cfgs, err := adm.DescribeTopicConfigs(ctx, o.tenant); err != nil || len(cfgs) != 1 || len(cfgs[0].Configs) == 0 {
		t.Errorf("orders' configs: %v %+v", err, cfgs)
	}
}

// Tollgate's quota admin — who may change Tollgate's settings but is a
// tenant of the cluster — tries to delete, recreate, grow, reconfigure,
// truncate and commit offsets on Tollgate's topics. Each is refused
// TOPIC_AUTHORIZATION_FAILED (an existing topic is not disclosed as
// existing), and the audit topic is as Tollgate left it: there, one
// partition, its records, no retention override; in the same
// DescribeConfigs Tollgate's own broker configs are still answered.
func attackMutateOwnTopics(t *testing.T, up *testkit.Upstream) {
	env, ctx, o := startOwnTopics(t, up)
	auditSomething(t, ctx, env)
	before := records(t, ctx, env, o.audit)
	d := upstreamAdmin(t, env)
	td, err := d.ListTopics(ctx, o.audit, o.usage)
	if err != nil {
		t.Fatal(err)
	}
	parts := len(td[o.audit].Partitions)
	adm := adminAs(t, env, "127.0.0.2")

	dels, err := adm.DeleteTopics(ctx, o.audit, o.usage)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dels {
		if !errors.Is(d.Err, errTAF) {
			t.Errorf("deleting %s: %v", d.Topic, d.Err)
		}
	}
	byID := kmsg.NewPtrDeleteTopicsRequest()
	byID.Version = 6
	byID.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: topicID(t, ctx, env, o.audit)}}
	if dr := bootstrapAs(t, ctx, env).do(t, byID).(*kmsg.DeleteTopicsResponse); dr.Topics[0].ErrorCode != errTAF.Code || dr.Topics[0].Topic != nil {
		t.Errorf("deleting the audit topic by id: %+v", dr.Topics)
	}
	if r, err := adm.CreateTopic(ctx, 3, -1, nil, o.usage); !errors.Is(err, errTAF) || !errors.Is(r.Err, errTAF) {
		t.Errorf("recreating the usage topic: %v %v", err, r.Err)
	}
	if r, err := adm.UpdatePartitions(ctx, 4, o.audit); err == nil && !errors.Is(r[o.audit].Err, errTAF) {
		t.Errorf("growing the audit topic: %v", r[o.audit].Err)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: o.audit, Count: 4}}
	if r := bootstrapAs(t, ctx, env).do(t, cp).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != errTAF.Code {
		t.Errorf("CreatePartitions of the audit topic: %+v", r.Topics)
	}
	retention := "1"
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, o.audit)
	if err != nil || len(alt) != 1 || !errors.Is(alt[0].Err, errTAF) {
		t.Errorf("shortening the audit topic's retention: %v %+v", err, alt)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	legacy.Version = 2
	legacy.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: o.audit,
		Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}}}
	if r := bootstrapAs(t, ctx, env).do(t, legacy).(*kmsg.AlterConfigsResponse); r.Resources[0].ErrorCode != errTAF.Code {
		t.Errorf("AlterConfigs of the audit topic: %+v", r.Resources)
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 2, 5000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: o.audit, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}}}}
	if r := bootstrapAs(t, ctx, env).do(t, dr).(*kmsg.DeleteRecordsResponse); r.Topics[0].Partitions[0].ErrorCode != errTAF.Code {
		t.Errorf("DeleteRecords of the audit topic: %+v", r.Topics)
	}
	for _, v := range []int16{8, 10} {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.Generation = v, "readers", -1
		tp := kmsg.NewOffsetCommitRequestTopic()
		if tp.Topic = o.audit; v >= 10 {
			tp.Topic, tp.TopicID = "", topicID(t, ctx, env, o.audit)
		}
		tp.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}
		oc.Topics = []kmsg.OffsetCommitRequestTopic{tp}
		if r := bootstrapAs(t, ctx, env).do(t, oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != errTAF.Code {
			t.Errorf("OffsetCommit v%d on the audit topic: %+v", v, r.Topics)
		}
	}
	txn := kmsg.NewPtrAddPartitionsToTxnRequest()
	txn.Version, txn.TransactionalID, txn.ProducerID = 3, "tx", 1
	txn.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: o.tenant, Partitions: []int32{0}}, {Topic: o.audit, Partitions: []int32{0}}}
	tr := bootstrapAs(t, ctx, env).do(t, txn).(*kmsg.AddPartitionsToTxnResponse)
	for _, tp := range tr.Topics {
		want := kerr.OperationNotAttempted.Code
		if tp.Topic == o.audit {
			want = errTAF.Code
		}
		if tp.Partitions[0].ErrorCode != want {
			t.Errorf("AddPartitionsToTxn of orders and the audit topic: %s got %d, want %d", tp.Topic, tp.Partitions[0].ErrorCode, want)
		}
	}

	// One DescribeConfigs: Tollgate's broker config (answered by
	// Tollgate), the audit topic (refused), orders (the broker's).
	bmd, err := kadm.NewClient(alice(t, env)).BrokerMetadata(ctx)
	if err != nil || len(bmd.Brokers) == 0 {
		t.Fatalf("brokers: %v %+v", err, bmd)
	}
	b0 := bmd.Brokers[0].NodeID // kfake's 0, the real cluster's 1
	b0s := strconv.Itoa(int(b0))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: b0s},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: o.audit},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: o.tenant},
	}
	dcr := brokerAs(t, ctx, env, b0, "127.0.0.2").do(t, dc).(*kmsg.DescribeConfigsResponse)
	got := map[string]kmsg.DescribeConfigsResponseResource{}
	for _, r := range dcr.Resources {
		got[r.ResourceName] = r
	}
	brokerKeys := map[string]bool{}
	for _, c := range got[b0s].Configs {
		brokerKeys[c.Name] = true
	}
	if got[b0s].ErrorCode != 0 || !brokerKeys["max.connections"] || len(brokerKeys) < 2 {
		t.Errorf("the broker resource: error %d, keys %v", got[b0s].ErrorCode, brokerKeys)
	}
	if r := got[o.audit]; r.ErrorCode != errTAF.Code || len(r.Configs) != 0 {
		t.Errorf("the audit topic resource: %+v", r)
	}
	if r := got[o.tenant]; r.ErrorCode != 0 || len(r.Configs) == 0 {
		t.Errorf("orders: %+v", r)
	}

	// The audit topic, read past the gateway, is as Tollgate left it.
	td, err = d.ListTopics(ctx, o.audit, o.usage)
	if err != nil || td[o.audit].Err != nil || td[o.usage].Err != nil || len(td[o.audit].Partitions) != parts {
		t.Fatalf("Tollgate's topics after the attack: %v %+v (the audit topic had %d partitions)", err, td, parts)
	}
	rcs, err := d.DescribeTopicConfigs(ctx, o.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rcs[0].Configs {
		if (c.Key == "retention.ms" || c.Key == "cleanup.policy") && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("the audit topic's %s was set to %s", c.Key, c.MaybeValue())
		}
	}
	starts, err := d.ListStartOffsets(ctx, o.audit)
	if err != nil || starts.Error() != nil {
		t.Fatal(err, starts.Error())
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("the audit topic's partition %d starts at %d: records were deleted", o.Partition, o.Offset)
		}
	})
	if after := records(t, ctx, env, o.audit); !slices.Equal(after, before) {
		t.Errorf("the audit topic changed:\n%q\nwas\n%q", after, before)
	}
}

func str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// attackClusterConfigTopic: in a Tollgate cluster, a tenant who produces a
// record to the shared configuration topic — the quota of its choice, in
// the topic's own format — is refused, and no instance applies it; nor can
// it read the topic (SCRAM credentials as Kafka formats them, API key
// hashes) or the usage exchange.
func attackClusterConfigTopic(t *testing.T, up *testkit.Upstream) {
	id := up.Topic(t, "atk")
	if !up.Real() {
		id = "atk"
	}
	cfgTopic, xTopic := "_tollgate-"+id+"-config", "_tollgate-"+id+"-exchange"
	freshTopics(t, up, cfgTopic, xTopic)
	env := startControlOn(t, up, func(c *app.Config) { c.Cluster.ID = id })
	ctx := ctxT(t, 60*time.Second)
	waitUntil(t, "the shared topic read", 10*time.Millisecond, 20*time.Second, func() bool {
		st, _ := env.App.Cluster()
		return st.ConfigLog.Ready
	})
	// One real change, so that the topic exists and holds a record.
	auditSomething(t, ctx, env)
	before := records(t, ctx, env, cfgTopic)
	if len(before) == 0 {
		t.Fatal("the configuration topic holds nothing")
	}
	// A forged record: alice's client-id unlimited. Whatever its bytes,
	// it must not reach the topic.
	forged := &kgo.Record{Topic: cfgTopic, Key: []byte("\x01\x0dclient_quotas\x0a\x09client-id\x00\x05alice" + "producer_byte_rate"),
		Value: []byte{0x7f, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	prod := alice(t, env, kgo.RecordRetries(2))
	if err := prod.ProduceSync(ctx, forged).FirstErr(); !errors.Is(err, errTAF) {
		t.Fatalf("producing to the configuration topic: %v, want %v", err, errTAF)
	}
	x := &kgo.Record{Topic: xTopic, Value: []byte("TGX\x01")}
	if err := prod.ProduceSync(ctx, x).FirstErr(); !errors.Is(err, errTAF) {
		t.Fatalf("producing to the exchange topic: %v, want %v", err, errTAF)
	}
	if after := records(t, ctx, env, cfgTopic); !slices.Equal(before, after) {
		t.Fatalf("the configuration topic changed: %d records before, %d after", len(before), len(after))
	}
	if r := env.App.Engine().Resolve(model.ProducerByteRate, "alice", "alice", time.Now()); r.Level != model.LevelNone {
		t.Fatalf("alice has a quota she set herself: %+v", r)
	}
	// Reading it: refused, no records.
	cons := alice(t, env, kgo.ConsumeTopics(cfgTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	fs := cons.PollFetches(fctx)
	n := 0
	fs.EachRecord(func(*kgo.Record) { n++ })
	var denied bool
	fs.EachError(func(_ string, _ int32, err error) { denied = denied || errors.Is(err, errTAF) })
	if n != 0 || !denied {
		t.Fatalf("fetching the configuration topic: %d records, refused %v", n, denied)
	}
}

// Topics by id fail closed (issue 23 point 5). The audit topic is
// recreated by an operator straight on the upstream; a tenant that learns
// its new id (a ConsumerGroupHeartbeat assignment shows ids) fetches by it
// at once, before anything could have taught the gateway the id: refused,
// no record. An id nobody knows is UNKNOWN_TOPIC_ID and reaches no
// broker. And in a broker's incremental fetch session, the audit topic
// added by id is refused while the tenant's own topic goes on being
// served: the session never carries it.
func attackOwnTopicIDs(t *testing.T, up *testkit.Upstream) {
	env, ctx, o := startOwnTopics(t, up)
	auditSomething(t, ctx, env)
	records(t, ctx, env, o.audit)
	old := topicID(t, ctx, env, o.audit)
	byID := func(id [16]byte) *kmsg.FetchRequest {
		req := fetchOne("", 0, 0)
		req.Version, req.MaxWaitMillis, req.SessionEpoch = 16, 100, -1
		req.Topics[0].TopicID = id
		return req
	}
	c := leaderOf(t, ctx, env, o.tenant)
	// The gateway knows the audit topic's id now.
	if p := c.do(t, byID(old)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != errTAF.Code {
		t.Fatalf("Fetch by the audit topic's id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	adm := upstreamAdmin(t, env)
	if _, err := adm.DeleteTopics(ctx, o.audit); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the audit topic recreated", func() error {
		r, err := adm.CreateTopic(ctx, 1, -1, nil, o.audit)
		if err == nil {
			err = r.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) && topicID(t, ctx, env, o.audit) != old {
			return nil
		}
		return err
	})
	secret := franzClient(t, kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err := secret.ProduceSync(ctx, &kgo.Record{Topic: o.audit, Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id := topicID(t, ctx, env, o.audit)
	if id == old {
		t.Fatal("the recreated audit topic kept its id")
	}
	resp := c.do(t, byID(id)).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch by the recreated audit topic's id: %+v", resp.Topics)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != errTAF.Code || len(p.RecordBatches) != 0 {
		t.Errorf("Fetch by the recreated audit topic's id: %v, %d bytes of records", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
	resp = c.do(t, byID([16]byte{0x5e, 0xc7})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("Fetch by an id no topic has: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	// An incremental fetch session on the tenant topic's leader.
	if err := alice(t, env).ProduceSync(ctx, &kgo.Record{Topic: o.tenant, Value: []byte("mine")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mine := topicID(t, ctx, env, o.tenant)
	open := byID(mine)
	open.SessionEpoch = 0
	first := c.do(t, open).(*kmsg.FetchResponse)
	if first.ErrorCode != 0 || first.SessionID == 0 {
		t.Fatalf("no fetch session: %v, session %d", kerr.ErrorForCode(first.ErrorCode), first.SessionID)
	}
	add := byID(id) // the audit topic added to the session
	add.SessionID, add.SessionEpoch = first.SessionID, 1
	add.Topics[0].Partitions[0].FetchOffset = 0
	for epoch, req := range []*kmsg.FetchRequest{add, nil, nil} {
		if req == nil { // the session's partitions, named by no request
			req = byID(mine)
			req.Topics = nil
			req.SessionID, req.SessionEpoch = first.SessionID, int32(epoch+1)
		}
		r := c.do(t, req).(*kmsg.FetchResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("session epoch %d: %v", epoch+1, kerr.ErrorForCode(r.ErrorCode))
		}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if tp.TopicID == id && (p.ErrorCode != errTAF.Code || len(p.RecordBatches) != 0) {
					t.Errorf("session epoch %d: the audit topic answered %v with %d bytes of records", epoch+1, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
				}
			}
		}
	}
}
