package e2e

import (
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// listener.name.<l>.max.connection.creation.rate holds back that
// listener's acceptor only; another listener keeps accepting at once.
func TestSynctestListenerCreationRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "OTHER", Bootstrap: "127.0.0.1:0"})
			c.BrokerConfigs = map[string]string{"listener.name.plaintext.max.connection.creation.rate": "2"}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		checkCreationRate2(t, env, "the listener's rate", addrs["PLAINTEXT"], 4, addrs["OTHER"])
	})
}

// Lowering max.connections live closes the least recently used
// connections.
func TestMaxConnectionsShedsLRU(t *testing.T) {
	// Not parallel: orders connections by 20 ms sleeps and gives the shed 200
	// ms.
	env := startControl(t)
	ctx := ctxT(t, 30*time.Second)
	var conns []net.Conn
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !apiVersions(t, c, 3*time.Second) {
			t.Fatalf("connection %d not served", i)
		}
		conns = append(conns, c)
		time.Sleep(20 * time.Millisecond) // distinct last-activity times
	}
	// The newest three are used again, so the first two are the least
	// recently used.
	for _, c := range conns[2:] {
		if !apiVersions(t, c, 3*time.Second) {
			t.Fatal("a connection was refused before the limit changed")
		}
	}
	// Six connections with the admin's (the most recent); a limit of
	// four sheds two.
	adm := adminAs(t, env, "127.0.0.2")
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("4")}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if !env.Logs.WaitFor("reason=max_connections_shed", 5*time.Second) {
		t.Fatal("nothing was shed")
	}
	time.Sleep(200 * time.Millisecond)
	for i, c := range conns {
		alive := apiVersions(t, c, 2*time.Second)
		if i < 2 && alive {
			t.Errorf("least recently used connection %d survived", i)
		}
	}
	alive := 0
	for _, c := range conns[2:] {
		if apiVersions(t, c, 2*time.Second) {
			alive++
		}
	}
	if alive == 0 {
		t.Error("every recently used connection was shed too")
	}
}
