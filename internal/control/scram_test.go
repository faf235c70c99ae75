package control

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/store"
)

// credFixture is a Credentials on a real store with a required audit file.
type credFixture struct {
	*fixture // for events()
	c        *Credentials
}

func newCredFixture(t *testing.T) *credFixture {
	t.Helper()
	f := newFixture(t)
	return &credFixture{fixture: f, c: &Credentials{Store: f.cq.Store, Audit: f.cq.Audit, Authz: f.cq.Authz}}
}

// saltedPassword is what a client sends (kadm.AlterUserSCRAMs: PBKDF2 with
// the mechanism's hash over the UTF-8 password).
func saltedPassword(t *testing.T, mech int8, password string, salt []byte, iterations int32) []byte {
	t.Helper()
	h, size := sha256.New, sha256.Size
	if mech == 2 {
		h, size = sha512.New, sha512.Size
	}
	sp, err := pbkdf2.Key(h, password, salt, int(iterations), size)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func upsert(t *testing.T, user string, mech int8, password string, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	t.Helper()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt = make([]byte, 24)
	rand.Read(u.Salt)
	if mech == 1 || mech == 2 {
		u.SaltedPassword = saltedPassword(t, mech, password, u.Salt, max(iterations, 1))
	} else {
		u.SaltedPassword = []byte("x")
	}
	return u
}

func deletion(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

func alterScram(dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) *kmsg.AlterUserSCRAMCredentialsRequest {
	r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	r.Deletions, r.Upsertions = dels, ups
	return r
}

func (f *credFixture) alter(who Initiator, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	return f.c.AlterUserScramCredentials(context.Background(), who, req)
}

// results renders a response as "user:code:message" lines in order.
func scramResults(resp *kmsg.AlterUserSCRAMCredentialsResponse) string {
	var b []string
	for _, r := range resp.Results {
		b = append(b, fmt.Sprintf("%s:%d:%s", r.User, r.ErrorCode, deref(r.ErrorMessage)))
	}
	return strings.Join(b, "\n")
}

func (f *credFixture) mustAlter(t *testing.T, req *kmsg.AlterUserSCRAMCredentialsRequest) {
	t.Helper()
	resp := f.alter(admin, req)
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("alter: %s", scramResults(resp))
		}
	}
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

func describedScram(resp *kmsg.DescribeUserSCRAMCredentialsResponse) string {
	b := []string{fmt.Sprintf("top:%d:%s", resp.ErrorCode, deref(resp.ErrorMessage))}
	for _, r := range resp.Results {
		s := fmt.Sprintf("%s:%d:%s", r.User, r.ErrorCode, deref(r.ErrorMessage))
		for _, ci := range r.CredentialInfos {
			s += fmt.Sprintf(" %d/%d", ci.Mechanism, ci.Iterations)
		}
		b = append(b, s)
	}
	return strings.Join(b, "\n")
}

func TestAlterScramValidation(t *testing.T) {
	f := newCredFixture(t)
	f.mustAlter(t, alterScram(nil, upsert(t, "existing", 1, "pw", 4096)))

	for _, tc := range []struct {
		name string
		req  *kmsg.AlterUserSCRAMCredentialsRequest
		want string
	}{
		{"empty user upsert", alterScram(nil, upsert(t, "", 1, "pw", 4096)), ":93:Username must not be empty"},
		{"empty user delete", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("", 1)}), ":93:Username must not be empty"},
		{"unknown mechanism 0", alterScram(nil, upsert(t, "u", 0, "pw", 4096)), "u:33:Unknown SCRAM mechanism"},
		{"unknown mechanism 3", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("existing", 3)}), "existing:33:Unknown SCRAM mechanism"},
		{"empty name before mechanism", alterScram(nil, upsert(t, "", 7, "pw", 4096)), ":93:Username must not be empty"},
		{"too few", alterScram(nil, upsert(t, "u", 1, "pw", 4095)), "u:93:Too few iterations"},
		{"too many", alterScram(nil, upsert(t, "u", 2, "pw", 16385)), "u:93:Too many iterations"},
		{"delete absent", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("existing", 2)}), "existing:91:Attempt to delete a user credential that does not exist"},
		{"delete unknown user", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("nobody", 1)}), "nobody:91:Attempt to delete a user credential that does not exist"},
		{"two upsertions of one user, two mechanisms", alterScram(nil, upsert(t, "u", 1, "pw", 4096), upsert(t, "u", 2, "pw", 4096)), "u:92:A user credential cannot be altered twice in the same request"},
		{"deleted and upserted", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("existing", 1)}, upsert(t, "existing", 1, "pw", 8192)), "existing:92:A user credential cannot be altered twice in the same request"},
		{"deleted twice", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("existing", 1), deletion("existing", 1)}), "existing:92:A user credential cannot be altered twice in the same request"},
		// The first error of a user wins; later entries are skipped.
		{"bad then good", alterScram(nil, upsert(t, "u", 1, "pw", 10), upsert(t, "u", 2, "pw", 4096)), "u:93:Too few iterations"},
		{"absent then duplicate", alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("nobody", 1)}, upsert(t, "nobody", 1, "pw", 4096)), "nobody:91:Attempt to delete a user credential that does not exist"},
		{"empty salted password", func() *kmsg.AlterUserSCRAMCredentialsRequest {
			u := upsert(t, "u", 1, "pw", 4096)
			u.SaltedPassword = nil
			return alterScram(nil, u)
		}(), "u:-1:<nil>"},
		{"empty salt", func() *kmsg.AlterUserSCRAMCredentialsRequest {
			u := upsert(t, "u", 1, "pw", 4096)
			u.Salt = nil
			return alterScram(nil, u)
		}(), "u:93:Salt must not be empty"},
		{"reserved user", alterScram(nil, upsert(t, "token", 1, "pw", 4096)), "token:93:The user name token is reserved: Tollgate authenticates SASL/PLAIN user token with an API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := f.c.Store.ScramCredentials()
			resp := f.alter(admin, tc.req)
			if got := scramResults(resp); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			after, _ := f.c.Store.ScramCredentials()
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("store changed by a refused request")
			}
		})
	}

	// Valid and invalid users in one request: the valid ones apply.
	resp := f.alter(admin, alterScram(
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("existing", 1), deletion("ghost", 2)},
		upsert(t, "new", 2, "pw", 8192), upsert(t, "bad", 1, "pw", 1)))
	if got, want := scramResults(resp), "existing:0:<nil>\nnew:0:<nil>\nghost:91:Attempt to delete a user credential that does not exist\nbad:93:Too few iterations"; got != want {
		t.Fatalf("mixed:\n%s\nwant\n%s", got, want)
	}
	if _, ok, _ := f.c.Store.ScramCredential("existing", auth.MechanismScramSHA256); ok {
		t.Fatal("deletion not applied")
	}
	if _, ok, _ := f.c.Store.ScramCredential("new", auth.MechanismScramSHA512); !ok {
		t.Fatal("upsertion not applied")
	}
}

// TestAlterScramOrder checks the response follows Kafka's HashMaps: success
// groups and the error group each in bucket order, not request order.
func TestAlterScramOrder(t *testing.T) {
	f := newCredFixture(t)
	// "ba" hashes to bucket 15, "c" to 3: Kafka answers c first.
	resp := f.alter(admin, alterScram(nil, upsert(t, "ba", 1, "pw", 4096), upsert(t, "c", 1, "pw", 4096)))
	if got, want := scramResults(resp), "c:0:<nil>\nba:0:<nil>"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	resp = f.alter(admin, alterScram(
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("ba", 1), deletion("zz", 1), deletion("y", 1)},
		upsert(t, "c", 2, "pw", 4096), upsert(t, "ba", 2, "pw", 4096), upsert(t, "x", 9, "pw", 4096)))
	// Deletions: ba ok (then removed by its duplicate), zz and y absent.
	// Upsertions: c ok, ba duplicate, x unknown mechanism.
	// Errors map: zz(bucket 0), y(9), ba(15), x(8) → 0, 8, 9, 15.
	want := "c:0:<nil>\n" +
		"zz:91:Attempt to delete a user credential that does not exist\n" +
		"x:33:Unknown SCRAM mechanism\n" +
		"y:91:Attempt to delete a user credential that does not exist\n" +
		"ba:92:A user credential cannot be altered twice in the same request"
	if got := scramResults(resp); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestJavaStringMap(t *testing.T) {
	for _, tc := range []struct {
		ops  []string // "+k" put, "-k" remove
		want string
	}{
		{[]string{"+ba", "+c"}, "c,ba"},
		{[]string{"+a", "+q"}, "a,q"}, // 97 and 113 share bucket 1: insertion order
		{[]string{"+q", "+a"}, "q,a"},
		{[]string{"+a", "+q", "-a", "+a"}, "q,a"}, // re-put goes to the end of its bucket
		{[]string{"+a", "+q", "+a"}, "a,q"},       // put of a present key keeps its place
	} {
		m := newJavaStringMap()
		for _, op := range tc.ops {
			if op[0] == '+' {
				m.put(op[1:])
			} else {
				m.remove(op[1:])
			}
		}
		if got := strings.Join(m.keys(), ","); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.ops, got, tc.want)
		}
	}
	// Growth: 13 keys double the table to 32, so "a" (97 → bucket 1 of 32)
	// and "q" (113 → 17) separate and "b"…"p" fall in between.
	m := newJavaStringMap()
	for _, k := range strings.Split("q,a,b,c,d,e,f,g,h,i,j,k,l", ",") {
		m.put(k)
	}
	if got := strings.Join(m.keys(), ","); got != "a,b,c,d,e,f,g,h,i,j,k,l,q" {
		t.Errorf("after resize: %s", got)
	}
	// Removing does not shrink the table.
	for _, k := range strings.Split("b,c,d,e,f,g,h,i,j,k,l", ",") {
		m.remove(k)
	}
	if got := strings.Join(m.keys(), ","); got != "a,q" {
		t.Errorf("after removals: %s", got)
	}
	if javaCompare("\uffff", "\U00010000") <= 0 {
		t.Error("javaCompare must order by UTF-16 code units (U+FFFF after a surrogate pair)")
	}
}

func TestDescribeScram(t *testing.T) {
	f := newCredFixture(t)
	d := func(who Initiator, req *kmsg.DescribeUserSCRAMCredentialsRequest) string {
		return describedScram(f.c.DescribeUserScramCredentials(context.Background(), who, req))
	}
	if got := d(admin, describeScram()); got != "top:0:<nil>" {
		t.Fatalf("empty store: %s", got)
	}
	f.mustAlter(t, alterScram(nil, upsert(t, "ba", 2, "pw", 8192)))
	f.mustAlter(t, alterScram(nil, upsert(t, "ba", 1, "pw", 4096), upsert(t, "c", 1, "pw", 5000)))
	for _, tc := range []struct {
		who  Initiator
		req  *kmsg.DescribeUserSCRAMCredentialsRequest
		want string
	}{
		{admin, describeScram(), "top:0:<nil>\nc:0:<nil> 1/5000\nba:0:<nil> 1/4096 2/8192"},
		{admin, describeScram("ba"), "top:0:<nil>\nba:0:<nil> 1/4096 2/8192"},
		{admin, describeScram("ba", "nobody", "ba", ""), "top:0:<nil>\n" +
			":91:Attempt to describe a user credential that does not exist: \n" +
			"nobody:91:Attempt to describe a user credential that does not exist: nobody\n" +
			"ba:92:Cannot describe SCRAM credentials for the same user twice in a single request: ba"},
		// Listing users needs DESCRIBE on CLUSTER: quota admins only.
		// Anyone else gets Kafka's answer, 31 with null messages and one
		// nameless result per requested user — whether the users exist
		// or not, so nothing is learnt.
		{alice, describeScram(), "top:31:<nil>"},
		{alice, describeScram("ba", "c"), "top:31:<nil>\n:31:<nil>\n:31:<nil>"},
		{alice, describeScram("nobody", "c"), "top:31:<nil>\n:31:<nil>\n:31:<nil>"},
		{anon, describeScram("ba", "c"), "top:31:<nil>\n:31:<nil>\n:31:<nil>"},
		{anon, describeScram(), "top:31:<nil>"},
		{admin, describeScram("c"), "top:0:<nil>\nc:0:<nil> 1/5000"},
	} {
		if got := d(tc.who, tc.req); got != tc.want {
			t.Errorf("%v %v:\n%s\nwant\n%s", tc.who.Principal, tc.req.Users, got, tc.want)
		}
	}
	// allow_anonymous_describe opens quotas and configs, not the users.
	f.c.Authz = Admins{AllowAnonymousDescribe: true}
	if got := d(anon, describeScram("c")); got != "top:31:<nil>\n:31:<nil>" {
		t.Errorf("anonymous with allow_anonymous_describe: %s", got)
	}
	f.c.Authz = Admins{Principals: []string{"User:ANONYMOUS"}}
	if got := d(anon, describeScram("c")); got != "top:0:<nil>\nc:0:<nil> 1/5000" {
		t.Errorf("ANONYMOUS listed as a quota admin: %s", got)
	}
}

func TestAlterScramDenied(t *testing.T) {
	f := newCredFixture(t)
	f.mustAlter(t, alterScram(nil, upsert(t, "b", 1, "pw", 4096)))
	for _, who := range []Initiator{alice, anon} {
		resp := f.alter(who, alterScram(
			[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("b", 1), deletion("a", 9)},
			upsert(t, "b", 2, "pw", 4096), upsert(t, "\uffff", 1, "pw", 4096), upsert(t, "\U00010000", 1, "pw", 4096)))
		want := "a:31:Cluster authorization failed.\nb:31:Cluster authorization failed.\n\U00010000:31:Cluster authorization failed.\n\uffff:31:Cluster authorization failed."
		if got := scramResults(resp); got != want {
			t.Fatalf("%v:\n%s\nwant\n%s", who.Principal, got, want)
		}
	}
	if _, ok, _ := f.c.Store.ScramCredential("b", auth.MechanismScramSHA256); !ok {
		t.Fatal("denied deletion applied")
	}
	evs := f.events(t)
	denied := 0
	for _, e := range evs {
		if e["outcome"] == "denied" {
			denied++
			if e["action"] != audit.ActionAlterUserScramCredentials || e["error_code"] != float64(31) {
				t.Fatalf("denied event: %v", e)
			}
		}
	}
	if denied != 8 {
		t.Fatalf("%d denied events, want one per user per request (8)", denied)
	}
}

func TestAlterScramAudit(t *testing.T) {
	f := newCredFixture(t)
	u := upsert(t, "alice", 2, "secret", 8192)
	f.mustAlter(t, alterScram(nil, u))
	u2 := upsert(t, "alice", 2, "secret2", 4096)
	f.mustAlter(t, alterScram(nil, u2))
	f.alter(admin, alterScram(nil, upsert(t, "alice", 1, "x", 100)))
	f.mustAlter(t, alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 2)}))

	evs := f.events(t)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4", len(evs))
	}
	type ch struct{ key, old, new any }
	want := []struct {
		outcome string
		code    float64
		change  ch
	}{
		{"applied", 0, ch{"SCRAM-SHA-512", nil, "<new credential, 8192 iterations>"}},
		{"applied", 0, ch{"SCRAM-SHA-512", "<credential, 8192 iterations>", "<new credential, 4096 iterations>"}},
		{"rejected", 93, ch{"SCRAM-SHA-256", nil, "<new credential, 100 iterations>"}},
		{"applied", 0, ch{"SCRAM-SHA-512", "<credential, 4096 iterations>", nil}},
	}
	for i, e := range evs {
		w := want[i]
		changes := e["changes"].([]any)
		c := changes[0].(map[string]any)
		if e["action"] != "alter_user_scram_credentials" || e["outcome"] != w.outcome || e["error_code"] != w.code ||
			len(changes) != 1 || c["key"] != w.change.key || c["old"] != w.change.old || c["new"] != w.change.new {
			t.Errorf("event %d: %v\nwant %+v", i, e, w)
		}
		res := e["target"].(map[string]any)["resource"].(map[string]any)
		if res["type"] != "user" || res["name"] != "alice" {
			t.Errorf("event %d target: %v", i, res)
		}
		if in := e["initiator"].(map[string]any); in["principal"] != "User:admin" || in["source"] != "10.1.2.3:50000" {
			t.Errorf("event %d initiator: %v", i, in)
		}
	}
	// No secret reaches the audit log.
	data, err := os.ReadFile(f.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range [][]byte{u.Salt, u.SaltedPassword, u2.Salt, u2.SaltedPassword} {
		for _, enc := range []string{base64.StdEncoding.EncodeToString(secret), fmt.Sprintf("%x", secret)} {
			if bytes.Contains(data, []byte(enc)) {
				t.Fatalf("audit log contains a salt or key")
			}
		}
	}
}

func TestAlterScramAuditRequired(t *testing.T) {
	f := newCredFixture(t)
	f.mustAlter(t, alterScram(nil, upsert(t, "keep", 1, "pw", 4096)))
	f.c.Audit = audit.NewLogger(audit.Config{Outputs: []audit.Output{{Sink: failingSink{errors.New("audit topic unavailable")}, Required: true}}})
	resp := f.alter(admin, alterScram(
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("keep", 1)},
		upsert(t, "new", 1, "pw", 4096)))
	for _, r := range resp.Results {
		if r.ErrorCode != -1 || !strings.Contains(deref(r.ErrorMessage), "required audit log could not record it") {
			t.Fatalf("result with a failing required sink: %s", scramResults(resp))
		}
	}
	if len(resp.Results) != 2 {
		t.Fatalf("results: %s", scramResults(resp))
	}
	if _, ok, _ := f.c.Store.ScramCredential("keep", auth.MechanismScramSHA256); !ok {
		t.Fatal("deletion committed without its audit event")
	}
	if _, ok, _ := f.c.Store.ScramCredential("new", auth.MechanismScramSHA256); ok {
		t.Fatal("upsertion committed without its audit event")
	}
	if _, ok := f.c.Scram("new", auth.MechanismScramSHA256); ok {
		t.Fatal("lookup sees an uncommitted credential")
	}
	// The ring has the refusals, not the applied events.
	var outcomes []string
	for _, e := range f.c.Audit.Recent(0) {
		outcomes = append(outcomes, string(e.Outcome))
		if e.Outcome == audit.Rejected && e.Supersedes == "" && e.Target.Resource.Name == "keep" {
			t.Errorf("the refused event's follow-up does not supersede it: %+v", e)
		}
	}
	if strings.Join(outcomes, ",") != "rejected,rejected" {
		t.Fatalf("ring: %v", outcomes)
	}
}

// TestScramInterop is the proof that the stored keys are right: a
// credential upserted the way kadm.AlterUserSCRAMs sends it authenticates a
// franz-go SCRAM client conversation with auth's SCRAM server, through
// Lookup; and PLAIN with the same password is checked against it.
func TestScramInterop(t *testing.T) {
	f := newCredFixture(t)
	for _, mech := range []int8{1, 2} {
		name, _ := scramMechanismName(mech)
		t.Run(name, func(t *testing.T) {
			user := "user-" + name
			f.mustAlter(t, alterScram(nil, upsert(t, user, mech, "p@ss,w=rd", 4096)))
			lookup := f.c.Lookup()
			if err := franzLogin(t, lookup, name, user, "p@ss,w=rd"); err != nil {
				t.Fatalf("login with the right password: %v", err)
			}
			if err := franzLogin(t, lookup, name, user, "wrong"); err == nil {
				t.Fatal("login with a wrong password succeeded")
			}
			if p, ok := lookup.Plain(user, "p@ss,w=rd"); !ok || p.Name != user {
				t.Fatalf("PLAIN via SCRAM: %v %v", p, ok)
			}
			// A credential for the other mechanism is not this one.
			other := auth.MechanismScramSHA512
			if mech == 2 {
				other = auth.MechanismScramSHA256
			}
			if err := franzLogin(t, lookup, other, user, "p@ss,w=rd"); err == nil {
				t.Fatal("login with a mechanism the user has no credential for succeeded")
			}
			// Replaced: the old password stops working at once.
			f.mustAlter(t, alterScram(nil, upsert(t, user, mech, "new-password", 8192)))
			if err := franzLogin(t, lookup, name, user, "p@ss,w=rd"); err == nil {
				t.Fatal("old password still works")
			}
			if err := franzLogin(t, lookup, name, user, "new-password"); err != nil {
				t.Fatalf("new password: %v", err)
			}
			// Deleted: no login.
			f.mustAlter(t, alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion(user, mech)}))
			if err := franzLogin(t, lookup, name, user, "new-password"); err == nil {
				t.Fatal("deleted credential still works")
			}
		})
	}

	// Durable: a new Credentials on the reopened store authenticates.
	f.mustAlter(t, alterScram(nil, upsert(t, "durable", 2, "pw-durable", 4096)))
	dir := filepath.Dir(f.c.Store.Path())
	f.c.Store.Close()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c2 := &Credentials{Store: s}
	if err := franzLogin(t, c2.Lookup(), auth.MechanismScramSHA512, "durable", "pw-durable"); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestCredentialsConcurrent runs logins while credentials change (for the
// race detector) and checks every change is visible when its alteration
// returns.
func TestCredentialsConcurrent(t *testing.T) {
	f := newCredFixture(t)
	f.mustAlter(t, alterScram(nil, upsert(t, "steady", 1, "pw", 4096)))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := f.c.Scram("steady", auth.MechanismScramSHA256); !ok {
					errs <- errors.New("steady credential missing")
					return
				}
				f.c.ByID("aaaaaaaaaaaaaaaa")
			}
		})
	}
	for i := range 20 {
		user := fmt.Sprintf("u%d", i)
		f.mustAlter(t, alterScram(nil, upsert(t, user, 1, "pw", 4096)))
		if _, ok := f.c.Scram(user, auth.MechanismScramSHA256); !ok {
			t.Fatalf("%s not visible after its alteration returned", user)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
