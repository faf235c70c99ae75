package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Shutdown stops accepting at once but lets a request already in flight (a
// long-polling fetch) get its response.
func TestShutdownFinishesInFlight(t *testing.T) {
	// Not parallel: bounds the shutdown's wall time.
	testkit.EachUpstream(t, shutdownFinishesInFlight)
}

func shutdownFinishesInFlight(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 30*time.Second)
	drain := up.Topic(t, "drain")
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(drain), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var leader int32 = -1
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == drain {
			leader = tp.Partitions[0].Leader
		}
	}
	fetch := fetchOne(drain, 0, 1)
	fetch.MaxWaitMillis = 1500
	fetch.MinBytes = 1 << 20 // more than there is: the broker waits the full 1.5 s
	fetch.Version = 11       // by topic name

	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cl.Broker(int(leader)).Request(ctx, fetch)
		done <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // let the fetch reach the broker

	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- env.App.Stop(context.Background()) }()
	// New connections are refused promptly.
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", env.Bootstrap, 200*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the gateway still accepts connections during shutdown")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight fetch failed during shutdown: %v", r.err)
	}
	if fr := r.resp.(*kmsg.FetchResponse); fr.ErrorCode != 0 || len(fr.Topics) != 1 {
		t.Fatalf("in-flight fetch got %+v", fr)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
}
