package cluster

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	r := Report{Instance: "a", Incarnation: 17, Seq: 9, SentMs: 1234, Leaving: true, Version: "v1", Addr: "127.0.0.1:9644", Digest: "d",
		Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "alice", Client: "c1", Value: 1024}, {Key: model.ConsumerByteRate, User: "", Client: "c2", Value: -3.5}}}
	parts := r.Encode()
	if len(parts) != 1 {
		t.Fatalf("%d parts", len(parts))
	}
	got, err := DecodeReport(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Instance != "a" || got.Incarnation != 17 || got.Seq != 9 || got.SentMs != 1234 || !got.Leaving || got.Version != "v1" ||
		got.Addr != r.Addr || got.Digest != "d" || got.Parts != 1 || len(got.Usage) != 2 || got.Usage[1] != r.Usage[1] {
		t.Fatalf("round trip: %+v", got)
	}
}

// TestReportSplits: a report with more usage than one record may carry is
// split into parts under the size bound that together hold every entry.
func TestReportSplits(t *testing.T) {
	t.Parallel()
	r := Report{Instance: "a", Seq: 1}
	for i := range 30000 {
		r.Usage = append(r.Usage, quota.Delta{Key: model.ProducerByteRate, User: fmt.Sprintf("user-%05d", i), Client: "client-with-a-long-name", Value: float64(i)})
	}
	parts := r.Encode()
	if len(parts) < 2 {
		t.Fatalf("%d parts for %d entries", len(parts), len(r.Usage))
	}
	n := 0
	for i, p := range parts {
		if len(p) > maxReportPart {
			t.Fatalf("part %d is %d bytes", i, len(p))
		}
		got, err := DecodeReport(p)
		if err != nil {
			t.Fatal(err)
		}
		if int(got.Part) != i || int(got.Parts) != len(parts) {
			t.Fatalf("part %d/%d says %d/%d", i, len(parts), got.Part, got.Parts)
		}
		for _, d := range got.Usage {
			if d != r.Usage[n] {
				t.Fatalf("entry %d: %+v != %+v", n, d, r.Usage[n])
			}
			n++
		}
	}
	if n != len(r.Usage) {
		t.Fatalf("%d of %d entries", n, len(r.Usage))
	}
}

// TestReportRejects: what no instance writes is refused — truncations,
// another format, counts beyond the bounds, bad keys and values.
func TestReportRejects(t *testing.T) {
	t.Parallel()
	good := (&Report{Instance: "a", Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "u", Client: "c", Value: 1}}}).Encode()[0]
	for i := range len(good) {
		if _, err := DecodeReport(good[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", i)
		}
	}
	if _, err := DecodeReport(append(bytes.Clone(good), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	other := bytes.Clone(good)
	other[3] = 3
	if _, err := DecodeReport(other); err == nil {
		t.Fatal("format 3 accepted")
	}
	for _, d := range []quota.Delta{{Key: 200, Value: 1}, {Key: model.ProducerByteRate, Value: math.NaN()}, {Key: model.ProducerByteRate, Value: math.Inf(1)}} {
		b := (&Report{Instance: "a", Usage: []quota.Delta{d}}).Encode()[0]
		if _, err := DecodeReport(b); err == nil {
			t.Fatalf("%+v accepted", d)
		}
	}
	if _, err := DecodeReport((&Report{}).Encode()[0]); err == nil {
		t.Fatal("report without an instance accepted")
	}
	// A count of entries far beyond what the record holds allocates nothing.
	huge := appendHeader(nil, &Report{Instance: "a"}, 0, 1, format1)
	huge = append(huge, 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := DecodeReport(huge); err == nil {
		t.Fatal("huge count accepted")
	}
}

// TestReportTenants: a report that names a tenant's buckets is written in
// format 2 (each entry carries its tenant) and reads back whole; one that
// names none stays in format 1, which instances of an older build read;
// truncations of format 2 are refused as format 1's are.
func TestReportTenants(t *testing.T) {
	t.Parallel()
	r := Report{Instance: "a", Seq: 3, Usage: []quota.Delta{
		{Key: model.ProducerByteRate, User: "alice", Client: "c1", Value: 10, Total: 20},
		{Key: model.ProducerByteRate, Tenant: "team-a", Value: 30, Total: 40},
		{Key: model.ConsumerByteRate, Tenant: "team-a", User: "alice", Value: 5, Total: 5},
	}}
	b := r.Encode()[0]
	if b[3] != 2 {
		t.Fatalf("format %d, want 2", b[3])
	}
	got, err := DecodeReport(b)
	if err != nil || len(got.Usage) != 3 {
		t.Fatalf("%+v %v", got, err)
	}
	for i := range r.Usage {
		if got.Usage[i] != r.Usage[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got.Usage[i], r.Usage[i])
		}
	}
	for i := range len(b) {
		if _, err := DecodeReport(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", i)
		}
	}
	plain := (&Report{Instance: "a", Usage: r.Usage[:1]}).Encode()[0]
	if plain[3] != 1 {
		t.Fatalf("a report without tenants in format %d", plain[3])
	}
}

func FuzzDecodeReport(f *testing.F) {
	f.Add((&Report{Instance: "a", Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "u", Client: "c", Value: 1}}}).Encode()[0])
	f.Add((&Report{Instance: "a", Usage: []quota.Delta{{Key: model.ProducerByteRate, Tenant: "t", User: "u", Value: 1}}}).Encode()[0])
	f.Add((&Report{Instance: "a", Usage: []quota.Delta{{Key: model.ConsumerByteRate, User: "u", Client: "c", Topic: "t", Value: 1},
		{Key: model.ProducerByteRate, Value: 2}}}).Encode()[0])
	f.Add([]byte("TGX\x01"))
	f.Add([]byte("TGX\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			return
		}
		// What decodes encodes to a record that decodes the same.
		again, err := DecodeReport(r.Encode()[0])
		if err != nil || again.Instance != r.Instance || len(again.Usage) != len(r.Usage) {
			t.Fatalf("re-encoding %+v: %+v, %v", r, again, err)
		}
		for i, d := range r.Usage {
			if again.Usage[i] != d && !math.IsNaN(d.Value) {
				t.Fatalf("entry %d: %+v, re-encoded %+v", i, d, again.Usage[i])
			}
		}
	})
}

// Per-topic usage (quota.Delta.Topic) travels in format 2; a part without
// any is written in format 1, which instances that know only format 1
// read, and a format-1 record still decodes.
func TestReportTopics(t *testing.T) {
	t.Parallel()
	plain := []quota.Delta{{Key: model.ProducerByteRate, User: "alice", Client: "c1", Value: 1024, Total: 4096}}
	b := (&Report{Instance: "a", Usage: plain}).Encode()[0]
	if b[3] != format1 {
		t.Fatalf("a report without topics in format %d", b[3])
	}
	withTopic := append(slices.Clone(plain), quota.Delta{Key: model.ConsumerByteRate, User: "bob", Client: "c2", Topic: "logs-a", Value: 7, Total: 9})
	b = (&Report{Instance: "a", Usage: withTopic}).Encode()[0]
	if b[3] != format2 {
		t.Fatalf("a report with a topic in format %d", b[3])
	}
	got, err := DecodeReport(b)
	if err != nil || !slices.Equal(got.Usage, withTopic) {
		t.Fatalf("round trip: %+v %v", got.Usage, err)
	}
	for i := range len(b) {
		if _, err := DecodeReport(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", i)
		}
	}
	// An entry flag format 2 does not know, and an empty topic, are refused.
	at := bytes.Index(b, []byte("bob\x02c2")) + len("bob\x02c2")
	for _, flags := range []byte{4, 0x80} {
		bad := bytes.Clone(b)
		bad[at] = flags
		if _, err := DecodeReport(bad); err == nil {
			t.Errorf("entry flags %#x accepted", flags)
		}
	}
	empty := bytes.Clone(b)
	empty[at+1] = 0 // the topic's length
	if _, err := DecodeReport(empty); err == nil {
		t.Error("an empty topic accepted")
	}
}

// A per-topic bucket's running total is kept apart from the client bucket
// of the same (user, client-id): a lost report of one is caught up from
// its own total, never from the other's.
func TestCatchUpKeepsTopicsApart(t *testing.T) {
	t.Parallel()
	var m memberState
	now := time.Unix(0, 0)
	client := quota.Delta{Key: model.ProducerByteRate, User: "alice", Client: "app", Value: 100, Total: 100}
	topic := client
	topic.Topic, topic.Value, topic.Total = "orders", 10, 10
	m.catchUp([]quota.Delta{client, topic}, now)
	// The next reports of both are lost; then each reports 5 more.
	client.Value, client.Total = 5, 305
	topic.Value, topic.Total = 5, 35
	us := []quota.Delta{client, topic}
	m.catchUp(us, now)
	if us[0].Value != 205 || us[1].Value != 25 {
		t.Errorf("caught up %v and %v, want 205 (client) and 25 (topic)", us[0].Value, us[1].Value)
	}
}

// The member map is bounded: reports of new instance ids past MaxMembers
// are dropped and counted, and the members kept go on being heard.
func TestMembersCapped(t *testing.T) {
	t.Parallel()
	e, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	x := NewExchange(ExchangeConfig{Self: Member{ID: "self", Incarnation: 1}, SessionTimeout: time.Hour, Ledger: e,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	now := time.Now()
	for i := range MaxMembers + 40 {
		r := Report{Instance: fmt.Sprintf("i-%03d", i), Incarnation: 1, Seq: 1, SentMs: now.UnixMilli()}
		for _, b := range r.Encode() {
			x.handle(b, now)
		}
	}
	if n := len(x.Members()); n != MaxMembers {
		t.Errorf("%d members kept, want %d", n, MaxMembers)
	}
	if got, want := x.Stats().Rejected, uint64(41); got != want {
		t.Errorf("%d reports rejected, want %d", got, want)
	}
	r := Report{Instance: "i-000", Incarnation: 1, Seq: 2, SentMs: now.UnixMilli()}
	for _, b := range r.Encode() {
		x.handle(b, now)
	}
	if got := x.Stats().Rejected; got != 41 {
		t.Errorf("a kept member's report was rejected (%d)", got)
	}
}
