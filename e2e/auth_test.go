package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

func TestSASLTerminateSmoke(t *testing.T) {
	t.Parallel()
	creds, keys := writeCredentials(t, map[string]string{"alice": "alice-secret"}, "team-a")
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
	})
	ctx := ctxT(t, 30*time.Second)
	for name, mech := range map[string]kgo.Opt{
		"SCRAM-SHA-256": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		"PLAIN":         kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		"API key":       kgo.SASL(plain.Auth{User: "token", Pass: keys[0]}.AsMechanism()),
	} {
		cl := newClient(t, env, nil, mech, kgo.DefaultProduceTopic("sasl"), kgo.AllowAutoTopicCreation())
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(name)}).FirstErr(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if !env.Logs.WaitFor("principal=User:team-a", time.Second) || !env.Logs.WaitFor("principal=User:alice", time.Second) {
		t.Fatal("principals not bound")
	}
}
