package store

import (
	"fmt"
	"testing"
)

// TestClientMetrics: subscriptions are kept by name across a reopen, reach
// every store on the shared log, and go when their last config does.
func TestClientMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, t.TempDir())
	lg := &memLog{}
	lg.attach(a)
	lg.attach(b)
	res, err := a.SetClientMetricsFunc([]ClientMetricsChange{
		{Name: "all-java", Ops: []ConfigOp{{Key: "metrics", Value: "*"}, {Key: "match", Value: "client_software_name=apache-kafka-java"}}},
		{Name: "a,b=c", Ops: []ConfigOp{{Key: "interval.ms", Value: "1000"}}},
	}, nil)
	if err != nil || len(res) != 2 || !res[0].Changed || len(res[0].Changes) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	want := fmt.Sprint([]ClientMetrics{
		{"a,b=c", map[string]string{"interval.ms": "1000"}},
		{"all-java", map[string]string{"metrics": "*", "match": "client_software_name=apache-kafka-java"}},
	})
	if got, err := b.ClientMetrics(); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("through the log: %v %v\nwant %v", got, err, want)
	}
	res, err = b.SetClientMetricsFunc([]ClientMetricsChange{{Name: "a,b=c", Ops: []ConfigOp{{Key: "interval.ms", Remove: true}}}}, nil)
	if err != nil || !res[0].Changed || *res[0].Changes[0].Old != "1000" {
		t.Fatalf("%+v %v", res, err)
	}
	a.Close()
	a = open(t, dir)
	if got, err := a.ClientMetrics(); err != nil || len(got) != 1 || got[0].Name != "all-java" {
		t.Fatalf("after a reopen: %v %v", got, err)
	}
	if _, err := a.SetClientMetricsFunc([]ClientMetricsChange{{Name: "", Ops: []ConfigOp{{Key: "metrics", Value: "x"}}}}, nil); err == nil {
		t.Fatal("a subscription without a name was stored")
	}
}
