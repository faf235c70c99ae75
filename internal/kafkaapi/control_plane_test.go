package kafkaapi

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// DescribeClientQuotas and AlterClientQuotas

func alterClientQuota(version int16, user, key string, value float64) *kmsg.AlterClientQuotasRequest {
	r := kmsg.NewPtrAlterClientQuotasRequest()
	r.Version = version
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ee.Type, ee.Name = "user", kmsg.StringPtr(user)
	e.Entity = append(e.Entity, ee)
	o := kmsg.NewAlterClientQuotasRequestEntryOp()
	o.Key, o.Value = key, value
	e.Ops = append(e.Ops, o)
	r.Entries = append(r.Entries, e)
	return r
}

func describeClientQuotas(version int16, user string) *kmsg.DescribeClientQuotasRequest {
	r := kmsg.NewPtrDescribeClientQuotasRequest()
	r.Version = version
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = "user", kmsg.QuotasMatchTypeExact, kmsg.StringPtr(user)
	r.Components = append(r.Components, c)
	return r
}

// The client-quota APIs are answered by the control plane, never
// forwarded: an admin's alteration is stored, applied to the quota engine
// before the answer, and visible to the next describe; anybody else's is
// refused with CLUSTER_AUTHORIZATION_FAILED and audited.
func TestClientQuotasAnswered(t *testing.T) {
	for v := int16(0); v <= maxVersion(49); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			cp := newControlPlane(t)
			f := newClientQuotas(cp.quotas)

			x := pass(t, f, connAs(aliceUser), alterClientQuota(v, "alice", "producer_byte_rate", 1024), nil)
			got := x.resp.(*kmsg.AlterClientQuotasResponse).Entries
			if len(got) != 1 || got[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
				t.Fatalf("a non-admin's alteration: %+v, want CLUSTER_AUTHORIZATION_FAILED", got)
			}
			if ev := cp.lastAudit(t); ev.Outcome != audit.Denied {
				t.Errorf("audited %s, want %s", ev.Outcome, audit.Denied)
			}
			if n := cp.quotaChanges.Load(); n != 0 {
				t.Fatalf("a refused alteration reached the quota engine (%d changes)", n)
			}

			x = pass(t, f, connAs(adminUser), alterClientQuota(v, "alice", "producer_byte_rate", 1024), nil)
			got = x.resp.(*kmsg.AlterClientQuotasResponse).Entries
			if len(got) != 1 || got[0].ErrorCode != 0 {
				t.Fatalf("an admin's alteration: %+v", got)
			}
			if n := cp.quotaChanges.Load(); n != 1 {
				t.Fatalf("%d changes reached the quota engine, want 1", n)
			}
			q := cp.lastQuotas.Load()
			if r := q.Resolve(model.ProducerByteRate, "alice", "any"); r.Quota != 1024 {
				t.Errorf("the engine's quotas give alice %v, want 1024", r.Quota)
			}

			for _, who := range []principal.Principal{adminUser, aliceUser} {
				x = pass(t, f, connAs(who), describeClientQuotas(v, "alice"), nil)
				d := x.resp.(*kmsg.DescribeClientQuotasResponse)
				if d.ErrorCode != 0 || len(d.Entries) != 1 || len(d.Entries[0].Values) != 1 ||
					d.Entries[0].Values[0].Key != "producer_byte_rate" || d.Entries[0].Values[0].Value != 1024 {
					t.Errorf("%s describes %+v, want alice's producer_byte_rate 1024", who.Name, d)
				}
			}
			x = pass(t, f, connAs(principal.AnonymousPrincipal), describeClientQuotas(v, "alice"), nil)
			if d := x.resp.(*kmsg.DescribeClientQuotasResponse); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(d.Entries) != 0 {
				t.Errorf("ANONYMOUS describes %+v, want CLUSTER_AUTHORIZATION_FAILED", d)
			}
		})
	}
}

// DescribeUserScramCredentials and AlterUserScramCredentials

func upsertScram(t *testing.T, user, password string) *kmsg.AlterUserSCRAMCredentialsRequest {
	t.Helper()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, 1, 4096 // SCRAM-SHA-256
	u.Salt = make([]byte, 24)
	rand.Read(u.Salt)
	sp, err := pbkdf2.Key(sha256.New, password, u.Salt, int(u.Iterations), sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	u.SaltedPassword = sp
	r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	r.Upsertions = append(r.Upsertions, u)
	return r
}

func describeScram(users ...string) *kmsg.DescribeUserSCRAMCredentialsRequest {
	r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		r.Users = append(r.Users, ru)
	}
	return r
}

// The SCRAM credential APIs are answered by the control plane, never
// forwarded: an admin's upsertion is usable for the next login at once;
// anybody else's is refused.
func TestScramCredentialsAnswered(t *testing.T) {
	cp := newControlPlane(t)
	f := newScramCredentials(cp.creds)

	x := pass(t, f, connAs(aliceUser), upsertScram(t, "bob", "secret"), nil)
	res := x.resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(res) != 1 || res[0].User != "bob" || res[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a non-admin's upsertion: %+v, want CLUSTER_AUTHORIZATION_FAILED", res)
	}
	if _, ok := cp.creds.Scram("bob", "SCRAM-SHA-256"); ok {
		t.Fatal("a refused upsertion was stored")
	}
	if ev := cp.lastAudit(t); ev.Outcome != audit.Denied {
		t.Errorf("audited %s, want %s", ev.Outcome, audit.Denied)
	}

	x = pass(t, f, connAs(adminUser), upsertScram(t, "bob", "secret"), nil)
	res = x.resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(res) != 1 || res[0].User != "bob" || res[0].ErrorCode != 0 {
		t.Fatalf("an admin's upsertion: %+v", res)
	}
	if cred, ok := cp.creds.Scram("bob", "SCRAM-SHA-256"); !ok || cred.Iterations != 4096 {
		t.Fatalf("bob's credential after the upsertion: %+v %v", cred, ok)
	}

	// Listing users needs DESCRIBE on CLUSTER, as in Kafka: a quota admin.
	x = pass(t, f, connAs(aliceUser), describeScram("bob", "carol"), nil)
	if d := x.resp.(*kmsg.DescribeUserSCRAMCredentialsResponse); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a non-admin's describe: error %d, want CLUSTER_AUTHORIZATION_FAILED", d.ErrorCode)
	}
	x = pass(t, f, connAs(adminUser), describeScram("bob", "carol"), nil)
	d := x.resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	got := map[string]string{}
	for _, r := range d.Results {
		if r.ErrorCode != 0 {
			got[r.User] = fmt.Sprintf("error %d", r.ErrorCode)
			continue
		}
		for _, ci := range r.CredentialInfos {
			got[r.User] += fmt.Sprintf("mechanism %d iterations %d", ci.Mechanism, ci.Iterations)
		}
	}
	want := map[string]string{"bob": "mechanism 1 iterations 4096", "carol": fmt.Sprintf("error %d", kerr.ResourceNotFound.Code)}
	if d.ErrorCode != 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("describe: error %d, %v; want %v", d.ErrorCode, got, want)
	}

	x = pass(t, f, connAs(principal.AnonymousPrincipal), describeScram("bob"), nil)
	if d := x.resp.(*kmsg.DescribeUserSCRAMCredentialsResponse); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("ANONYMOUS describes %+v, want CLUSTER_AUTHORIZATION_FAILED", d)
	}
}

// A control-plane request kmsg cannot read closes the connection: nothing
// is answered, applied or forwarded.
func TestControlPlaneMalformedRequest(t *testing.T) {
	cp := newControlPlane(t)
	for _, tc := range []struct {
		f   proxy.Filter
		req kmsg.Request
	}{
		{newClientQuotas(cp.quotas), alterClientQuota(1, "alice", "producer_byte_rate", 1)},
		{newClientQuotas(cp.quotas), describeClientQuotas(1, "alice")},
		{newScramCredentials(cp.creds), upsertScram(t, "bob", "secret")},
		{newScramCredentials(cp.creds), describeScram("bob")},
		{&brokerConfigs{owner: cp.brokers}, describeConfigs(4, describeRes(broker, "0", "max.connections"))},
		{&brokerConfigs{owner: cp.brokers}, alterConfigs(false, alterRes(broker, "", "max.connections", "1"))},
		{&brokerConfigs{owner: cp.brokers}, incrementalAlter(false, incrementalRes(broker, "", setOp("max.connections", "1")))},
	} {
		r, err := proxytest.Request(tc.req, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.Payload = r.Payload[:len(r.Payload)-3] // cut short
		v := tc.f.(proxy.RequestHook).OnRequest(connAs(adminUser), r)
		if v.Close != proxy.ReasonBadFrame || v.Respond != nil || v.Forward != nil {
			t.Errorf("%s cut short: verdict %+v, want the connection closed as %s", kmsg.NameForKey(tc.req.Key()), v, proxy.ReasonBadFrame)
		}
	}
	if n := len(cp.audit.Recent(0)); n != 0 {
		t.Errorf("%d events audited for malformed requests", n)
	}
	if d := cp.dynamic(t); len(d) != 0 {
		t.Errorf("broker configs %v applied from malformed requests", d)
	}
}
