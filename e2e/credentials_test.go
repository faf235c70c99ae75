package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// SCRAM credentials set with Kafka's own API (AlterUserScramCredentials,
// answered by Tollgate) and API keys created on the admin port are usable
// for logins at once; a revoked key is not.
//
// On the real cluster too: the logins end at Tollgate (terminate mode), the
// upstream sees Tollgate's own connections, and the produce that proves a
// login goes to the real brokers.
func TestCredentialsManagedLive(t *testing.T) {
	// Not parallel: each login must succeed within 4 s of wall time.
	testkit.EachUpstream(t, credentialsManagedLive)
}

func credentialsManagedLive(t *testing.T, up *testkit.Upstream) {
	// The quota admin's API key for the admin port, from a credentials file.
	credFile, adminKeys := writeCredentials(t, nil, "admin")
	topic := up.Topic(t, "creds")
	freshTopics(t, up, topic)
	env := startControlOn(t, up, func(c *app.Config) {
		c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"})
		c.CredentialsFile = credFile
	})
	ctx := ctxT(t, 30*time.Second)
	defer http.DefaultClient.CloseIdleConnections()
	saslBoot := env.App.Gateway().BootstrapAddrs()["SASL"]
	login := func(opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslBoot), opt, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.RecordDeliveryTimeout(3*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		lctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		return cl.ProduceSync(lctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	carol := scram.Auth{User: "carol", Pass: "carol-secret"}
	if err := login(kgo.SASL(carol.AsSha512Mechanism())); err == nil {
		t.Fatal("carol logged in before she had a credential")
	}
	adm := adminAs(t, env, "127.0.0.2")
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	if err := login(kgo.SASL(carol.AsSha512Mechanism())); err != nil {
		t.Fatalf("carol with her new SCRAM-SHA-512 credential: %v", err)
	}
	if err := login(kgo.SASL(plain.Auth{User: "carol", Pass: "carol-secret"}.AsMechanism())); err != nil {
		t.Fatalf("carol with PLAIN, checked against the SCRAM credential: %v", err)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || len(desc["carol"].CredInfos) != 1 || desc["carol"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("DescribeUserSCRAMs: %v %+v", err, desc)
	}

	// An API key from the admin port, then revoked.
	body, _ := json.Marshal(map[string]string{"identity": "team-b"})
	creq, _ := http.NewRequest("POST", "http://"+env.App.HTTPAddr()+"/api/v1/apikeys", bytes.NewReader(body))
	creq.Header.Set("Content-Type", "application/json")
	creq.Header.Set("Authorization", "Bearer "+adminKeys[0])
	resp, err := http.DefaultClient.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, Key string }
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != 201 || created.Key == "" {
		t.Fatalf("create API key: %d %+v", resp.StatusCode, created)
	}
	token := kgo.SASL(plain.Auth{User: "token", Pass: created.Key}.AsMechanism())
	if err := login(token); err != nil {
		t.Fatalf("login with the new API key: %v", err)
	}
	if !env.Logs.WaitFor("principal=User:team-b", time.Second) {
		t.Error("the API key did not authenticate as its identity")
	}
	req, _ := http.NewRequest("DELETE", "http://"+env.App.HTTPAddr()+"/api/v1/apikeys/"+created.ID, nil)
	req.Header.Set("Authorization", "Bearer "+adminKeys[0])
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != 200 {
		t.Fatalf("revoke: %d", dresp.StatusCode)
	}
	if err := login(token); err == nil {
		t.Fatal("a revoked API key still logs in")
	}
}
