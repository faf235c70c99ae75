package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

const consoleShareConsumer = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"

// A share group (KIP-932) through the gateway: Kafka's console share
// consumer (the Java KafkaShareConsumer: ShareGroupHeartbeat, ShareFetch
// with its acknowledgements, FindCoordinator for the share coordinator)
// reads every record of a topic whose partitions are led by all three
// brokers, the group's share.auto.offset.reset set to earliest through the
// gateway (IncrementalAlterConfigs on the group), and dials only gateway
// addresses. Kafka 4's share groups are on by default (share.version 2 on
// 4.4); Kafka 3.9 has none, so its row has nothing to run.
func TestJavaShareConsumer(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		if strings.HasPrefix(javaVersion(up), "3.") {
			t.Log("Kafka 3.x has no share groups (KIP-932 arrived in 4.0)")
			return
		}
		javaShareConsumer(t, up)
	})
}

func javaShareConsumer(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 3*time.Minute)
	topic, group := up.Topic(t, "share-orders"), up.GroupID(t, "share-g")
	const partitions, n = 3, 60
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil)
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	env.SpreadLeaders(t, topic, partitions)

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set the group's share.auto.offset.reset: %v %+v", err, resp)
	}

	var want []string
	var recs []*kgo.Record
	for i := range n {
		k, v := fmt.Sprintf("k%d", i%partitions), fmt.Sprintf("v%d", i)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		want = append(want, k+"\t"+v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := runJava(t, up, 150*time.Second, "", consoleShareConsumer,
		"--bootstrap-server", env.Bootstrap, "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(n), "--timeout-ms", "60000",
		"--formatter-property", "print.key=true")
	got := strings.Split(strings.TrimSuffix(run.Stdout, "\n"), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the share consumer read %d records:\n%s\nwant %d:\n%s\nstderr:\n%s", len(got), tail(strings.Join(got, "\n"), 10), len(want), tail(strings.Join(want, "\n"), 10), tail(run.Stderr, 30))
	}
	checkJavaDials(t, "the share consumer", env, run.Dials)
}
