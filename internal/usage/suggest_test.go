package usage

import (
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var minutes []*Minute
	add := func(inst string, i int, rows ...Row) {
		minutes = append(minutes, &Minute{V: 1, Minute: t0.Add(time.Duration(i) * time.Minute), Instance: inst, Rows: rows})
	}
	for i := range 60 {
		// alice: 100 B/s produced every minute, split over two instances
		// of a cluster; 50 B/s fetched in half of them.
		add("a", i, Row{User: "alice", ClientID: "app", Tenant: "retail", Counters: Counters{ProduceBytes: 2400, FetchBytes: int64(3000 * (i % 2))}})
		add("b", i, Row{User: "alice", ClientID: "app", Tenant: "retail", Counters: Counters{ProduceBytes: 3600}})
	}
	// One busy minute, 1 000 B/s; the same minute of instance a again (a
	// topic that delivered it twice) is counted once.
	add("a", 60, Row{User: "alice", ClientID: "app", Tenant: "retail", Counters: Counters{ProduceBytes: 60000}})
	add("a", 60, Row{User: "alice", ClientID: "app", Tenant: "retail", Counters: Counters{ProduceBytes: 60000}})
	// bob, in the same tenant; a per-topic row is not counted twice; a
	// minute outside the window is not read.
	add("c", 0, Row{User: "bob", ClientID: "etl", Tenant: "retail", Counters: Counters{ProduceBytes: 600}},
		Row{User: "bob", ClientID: "etl", Topic: "orders", Counters: Counters{ProduceBytes: 500}})
	add("c", 500, Row{User: "bob", ClientID: "etl", Counters: Counters{ProduceBytes: 1 << 40}})
	src := func(fn func(*Minute) error) error {
		for _, m := range minutes {
			if err := fn(m); err != nil {
				return err
			}
		}
		return nil
	}
	q := SuggestQuery{Since: t0, Until: t0.Add(2 * time.Hour), By: ByUser, Percentile: 95, Headroom: 0.2}
	got, err := Suggest(src, q)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		user, key        string
		minutes          int
		atP, peak, quota float64
		throttled        int
	}
	wants := []want{
		// 61 minutes: the 58th of them sorted is 100 B/s; 120 with 20 %;
		// the busy minute alone above it.
		{"alice", "producer_byte_rate", 61, 100, 1000, 120, 1},
		{"alice", "consumer_byte_rate", 30, 50, 50, 60, 0},
		{"bob", "producer_byte_rate", 1, 10, 10, 12, 0},
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d proposals, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		if *g.User != w.user || g.Key != w.key || g.Minutes != w.minutes || g.AtPercentile != w.atP || g.Peak != w.peak ||
			g.Quota != w.quota || g.ThrottledMinutes != w.throttled || g.ClientID != nil {
			t.Errorf("proposal %d: %+v (user %s), want %+v", i, g, *g.User, w)
		}
	}
	// By tenant: alice's and bob's minutes add up.
	q.By = ByTenant
	got, err = Suggest(src, q)
	if err != nil || len(got) != 2 || *got[0].Tenant != "retail" || got[0].Minutes != 61 || got[0].Peak != 1000 {
		t.Fatalf("by tenant: %+v %v", got, err)
	}
	if got[0].AtPercentile != 100 { // minute 0: alice's 100 and bob's 10 B/s
		t.Errorf("by tenant: at the percentile %v", got[0].AtPercentile)
	}
	for _, bad := range []SuggestQuery{{By: ByUser, Percentile: 0, Since: t0, Until: t0.Add(time.Hour)},
		{By: ByTopic, Percentile: 99, Since: t0, Until: t0.Add(time.Hour)},
		{By: ByUser, Percentile: 99, Headroom: -1, Since: t0, Until: t0.Add(time.Hour)}} {
		if _, err := Suggest(src, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
