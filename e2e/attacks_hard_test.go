package e2e

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
)

// Rows of the attacks table (attacks_test.go) for points 7, 9, 10 and 11
// of the issue "A hostile tenant gets nothing": what the attacker sends,
// over real sockets with real clients, what they get (a refusal, never a
// grant), and the proof that nothing was granted or left growing.
var attacksHard = []struct {
	name  string
	point string
	run   func(t *testing.T)
}{
	{"DescribeUserScramCredentials: a tenant cannot list who can log in", "9", attackListUsers},
}

func TestAttacksHard(t *testing.T) {
	for _, a := range attacksHard {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			t.Logf("issue point %s", a.point)
			a.run(t)
		})
	}
}

// A tenant (alice, authenticated) and an unauthenticated client ask for the
// SCRAM users — all of them, or by name to learn which exist. Both get
// Kafka's answer for a principal without DESCRIBE on CLUSTER: error 31 for
// the response and one nameless 31 per name, the same for an existing
// user as for an unknown one. The quota admin sees the users; alice still
// describes quotas (DescribeClientQuotas stays open to authenticated
// principals).
func attackListUsers(t *testing.T) {
	env := startControl(t, func(c *app.Config) { c.Authorization.AllowAnonymousDescribe = true })
	ctx := ctxT(t, 30*time.Second)
	admin := adminAs(t, env, "127.0.0.2")
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
		{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "dave-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("the admin creates users: %v %v", err, res.Error())
	}

	for _, who := range []struct{ name, ip string }{{"alice", "127.0.0.3"}, {"ANONYMOUS", "127.0.0.1"}} {
		cl := adminAs(t, env, who.ip)
		for _, ask := range [][]string{nil, {"carol"}, {"nobody"}} {
			got, err := cl.DescribeUserSCRAMs(ctx, ask...)
			if !errors.Is(err, kerr.ClusterAuthorizationFailed) || len(got) != 0 {
				t.Errorf("%s lists users %v: %v %+v, want CLUSTER_AUTHORIZATION_FAILED and nothing", who.name, ask, err, got)
			}
		}
		// The exact answer, by hand: existing and unknown users alike.
		rc := dialRawVia(t, ctx, netDialerFrom(who.ip), env.Bootstrap)
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range []string{"carol", "nobody"} {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		resp := rc.do(t, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.ErrorMessage != nil || len(resp.Results) != 2 {
			t.Fatalf("%s: %+v", who.name, resp)
		}
		for _, r := range resp.Results {
			if r.User != "" || r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage != nil || len(r.CredentialInfos) != 0 {
				t.Errorf("%s: a result tells something: %+v", who.name, r)
			}
		}
	}

	// The admin lists them; alice still reads quotas.
	got, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil || len(got) != 2 || got["dave"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("the admin lists users: %v %+v", err, got)
	}
	alice := kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.3"))))
	if _, err := alice.DescribeClientQuotas(ctx, false, nil); err != nil {
		t.Errorf("alice describes quotas: %v", err)
	}
}

// netDialerFrom is a dialer whose connections come from ip.
func netDialerFrom(ip string) *fromDialer { return &fromDialer{ip: ip} }

type fromDialer struct{ ip string }

func (d *fromDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return fromIP(d.ip)(ctx, network, addr)
}
