package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthorizationMatrix: admin / authenticated / anonymous × alter,
// validate_only, describe, with and without AllowAnonymousDescribe.
func TestAuthorizationMatrix(t *testing.T) {
	const ok, denied = int16(0), int16(31)
	cases := []struct {
		who                           Initiator
		allowAnon                     bool
		alter, validateOnly, describe int16
	}{
		{admin, false, ok, ok, ok},
		{alice, false, denied, denied, ok},
		{anon, false, denied, denied, denied},
		{anon, true, denied, denied, ok},
		{Initiator{}, false, denied, denied, denied},
	}
	for _, tc := range cases {
		f := newFixture(t)
		f.cq.Authz = Admins{Principals: []string{"User:admin"}, AllowAnonymousDescribe: tc.allowAnon}
		name := tc.who.Principal.String()
		e := entry(ent(named("user", "u"), named("user", "v")), set("producer_byte_rate", 1))

		vo := f.alter(t, tc.who, true, e)
		if vo.Entries[0].ErrorCode != tc.validateOnly {
			t.Errorf("%s validate_only: %d", name, vo.Entries[0].ErrorCode)
		}
		al := f.alter(t, tc.who, false, e)
		if al.Entries[0].ErrorCode != tc.alter {
			t.Errorf("%s alter: %d", name, al.Entries[0].ErrorCode)
		}
		if tc.alter == denied {
			// Every entry echoed as sent (no collapsing of the repeated
			// type) with Kafka's message; nothing stored.
			got := al.Entries[0]
			if len(got.Entity) != 2 || deref(got.ErrorMessage) != "Cluster authorization failed." || f.storedCount(t) != 0 {
				t.Errorf("%s denied alter: %+v", name, got)
			}
			evs := f.events(t)
			if len(evs) != 2 || evs[0]["outcome"] != "denied" || evs[1]["outcome"] != "denied" || evs[1]["error_code"] != 31.0 {
				t.Errorf("%s denied events: %v", name, evs)
			}
		}
		d := f.describe(t, tc.who, false)
		if d.ErrorCode != tc.describe {
			t.Errorf("%s describe: %d", name, d.ErrorCode)
		}
		if tc.describe == denied && (d.Entries != nil || deref(d.ErrorMessage) != "Cluster authorization failed.") {
			t.Errorf("%s denied describe: %+v", name, d)
		}
	}

	// Several entries: every one gets 31.
	f := newFixture(t)
	resp := f.alter(t, alice, false,
		entry(ent(named("user", "a")), set("producer_byte_rate", 1)),
		entry(ent(named("group", "x")), set("foo", -1)),
		entry(ent(named("user", "a")), set("producer_byte_rate", 2)),
	)
	if len(resp.Entries) != 3 {
		t.Fatalf("denied request: %d entries", len(resp.Entries))
	}
	for _, e := range resp.Entries {
		if e.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("%+v", e)
		}
	}
}

func TestAdmins(t *testing.T) {
	a := Admins{Principals: []string{"User:admin", "ops", "Group:team"}}
	for _, tc := range []struct {
		p    principal.Principal
		want bool
	}{
		{principal.Principal{Type: "User", Name: "admin"}, true},
		{principal.Principal{Name: "admin"}, true},
		{principal.Principal{Type: "User", Name: "ops"}, true},
		{principal.Principal{Type: "Group", Name: "ops"}, false},
		{principal.Principal{Type: "Group", Name: "team"}, true},
		{principal.Principal{Type: "User", Name: "team"}, false},
		{principal.Principal{Type: "User", Name: "Admin"}, false},
		{principal.AnonymousPrincipal, false},
		{principal.Principal{}, false},
	} {
		if got := a.IsAdmin(tc.p); got != tc.want {
			t.Errorf("IsAdmin(%v) = %v", tc.p, got)
		}
	}
	if !(Admins{Principals: []string{"User:ANONYMOUS"}}).Authorize(anon, OpAlterConfigs) {
		t.Error("explicitly listed ANONYMOUS is not an admin")
	}
	// No authorizer: nobody alters, authenticated principals describe.
	f := newFixture(t)
	f.cq.Authz = nil
	if r := f.alter(t, admin, false, entry(ent(named("user", "u")), set("producer_byte_rate", 1))); r.Entries[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Error("nil Authz lets admin alter")
	}
	if d := f.describe(t, alice, false); d.ErrorCode != 0 {
		t.Error("nil Authz denies describe")
	}
	if d := f.describe(t, anon, false); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Error("nil Authz lets ANONYMOUS describe")
	}
}

// TestAuditEvents checks the audit file: one JSON line per entry with
// outcome, error, initiator, target and old → new values.
func TestAuditEvents(t *testing.T) {
	f := newFixture(t)
	u := ent(named("user", "<default>"), dflt("client-id"))
	f.mustAlter(t, entry(u, set("producer_byte_rate", 1000), set("request_percentage", 12.5)))
	f.mustAlter(t, entry(u, set("producer_byte_rate", 2000), rm("request_percentage"), rm("consumer_byte_rate")))
	f.alter(t, admin, true, entry(u, set("producer_byte_rate", 3000)))
	f.alter(t, admin, false, entry(u, set("producer_byte_rate", 3000.5)))
	f.alter(t, alice, false, entry(u, set("producer_byte_rate", 4000)))

	evs := f.events(t)
	if len(evs) != 5 {
		t.Fatalf("%d events", len(evs))
	}
	type ch struct {
		key      string
		old, new any
	}
	want := []struct {
		outcome string
		code    float64
		msg     string
		who     string
		changes []ch
	}{
		{"applied", 0, "", "User:admin", []ch{{"producer_byte_rate", nil, 1000.0}, {"request_percentage", nil, 12.5}}},
		{"applied", 0, "", "User:admin", []ch{{"producer_byte_rate", 1000.0, 2000.0}, {"request_percentage", 12.5, nil}, {"consumer_byte_rate", nil, nil}}},
		{"validated", 0, "", "User:admin", []ch{{"producer_byte_rate", 2000.0, 3000.0}}},
		{"rejected", 42, "producer_byte_rate cannot be a fractional value.", "User:admin", []ch{{"producer_byte_rate", 2000.0, 3000.5}}},
		{"denied", 31, "Cluster authorization failed.", "User:alice", []ch{{"producer_byte_rate", 2000.0, 4000.0}}},
	}
	ids := map[any]bool{}
	for i, w := range want {
		e := evs[i]
		ids[e["id"]] = true
		if e["action"] != "alter_client_quotas" || e["outcome"] != w.outcome || e["error_code"] != w.code {
			t.Errorf("event %d: %v", i, e)
		}
		if msg, _ := e["error_message"].(string); msg != w.msg {
			t.Errorf("event %d message %q", i, msg)
		}
		if ts, err := time.Parse(time.RFC3339Nano, e["time"].(string)); err != nil || !strings.HasSuffix(e["time"].(string), "Z") || time.Since(ts) > time.Minute {
			t.Errorf("event %d time %v", i, e["time"])
		}
		ini := e["initiator"].(map[string]any)
		if ini["principal"] != w.who || ini["listener"] != "SASL_SSL" || ini["source"] == "" || ini["client_id"] == "" {
			t.Errorf("event %d initiator %v", i, ini)
		}
		target := e["target"].(map[string]any)["entity"].([]any)
		if u := target[0].(map[string]any); u["type"] != "user" || u["name"] != "<default>" || u["default"] != false {
			t.Errorf("event %d target user %v", i, u)
		}
		if c := target[1].(map[string]any); c["type"] != "client-id" || c["name"] != nil || c["default"] != true {
			t.Errorf("event %d target client-id %v", i, c)
		}
		changes := e["changes"].([]any)
		if len(changes) != len(w.changes) {
			t.Errorf("event %d changes %v", i, changes)
			continue
		}
		for j, wc := range w.changes {
			c := changes[j].(map[string]any)
			if c["key"] != wc.key || c["old"] != wc.old || c["new"] != wc.new {
				t.Errorf("event %d change %d: %v, want %v", i, j, c, wc)
			}
		}
	}
	if len(ids) != 5 {
		t.Error("event ids not unique")
	}
	if n := len(f.cq.Audit.Recent(0)); n != 5 {
		t.Errorf("ring holds %d events", n)
	}
}

type failingSink struct{ err error }

func (s failingSink) Name() string                                      { return "failing" }
func (s failingSink) Write(context.Context, *audit.Event, []byte) error { return s.err }
func (s failingSink) Close() error                                      { return nil }

// TestFailClosed: with a required audit sink that fails, alterations are
// refused with -1 and nothing is applied.
func TestFailClosed(t *testing.T) {
	t.Run("removed directory", func(t *testing.T) {
		f := newFixture(t)
		logs := filepath.Join(f.dir, "logs")
		if err := os.Mkdir(logs, 0o700); err != nil {
			t.Fatal(err)
		}
		sink, err := audit.OpenFileSink(filepath.Join(logs, "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		f.cq.Audit = audit.NewLogger(audit.Config{Outputs: []audit.Output{
			{Sink: sink, Required: true},
			{Sink: audit.NewWriterSink("stdout", &stdout)},
		}})
		f.mustAlter(t, entry(ent(named("user", "u")), set("producer_byte_rate", 1)))
		if err := os.RemoveAll(logs); err != nil {
			t.Fatal(err)
		}
		n := f.changeCount()
		for _, vo := range []bool{false, true} {
			resp := f.alter(t, admin, vo,
				entry(ent(named("user", "u")), set("producer_byte_rate", 2)),
				entry(ent(named("user", "v")), set("producer_byte_rate", 3)),
			)
			for _, e := range resp.Entries {
				if e.ErrorCode != -1 || !strings.Contains(deref(e.ErrorMessage), "required audit log") {
					t.Fatalf("validate_only=%v: %d %q", vo, e.ErrorCode, deref(e.ErrorMessage))
				}
			}
		}
		if v := f.stored(t, store.Named("user", "u")); v["producer_byte_rate"] != 1 {
			t.Fatalf("refused change applied: %v", v)
		}
		if f.storedCount(t) != 1 || f.changeCount() != n {
			t.Fatal("refused change stored or notified")
		}
		// The optional sink never saw an applied event for the refused
		// changes, only the refusals, each superseding the unwritten event.
		var outcomes []string
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var e audit.Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			outcomes = append(outcomes, string(e.Outcome))
			if e.Outcome == audit.Rejected && (e.Supersedes == "" || e.ErrorCode != -1) {
				t.Errorf("refusal event %+v", e)
			}
		}
		if strings.Join(outcomes, ",") != "applied,rejected,rejected,rejected,rejected" {
			t.Fatalf("optional sink outcomes %v", outcomes)
		}
	})
	t.Run("injected failing sink", func(t *testing.T) {
		f := newFixture(t)
		f.cq.Audit = audit.NewLogger(audit.Config{Outputs: []audit.Output{{Sink: failingSink{errors.New("kafka audit topic unavailable")}, Required: true}}})
		resp := f.alter(t, admin, false, entry(ent(dflt("ip")), set("connection_creation_rate", 5)))
		if e := resp.Entries[0]; e.ErrorCode != -1 || !strings.Contains(deref(e.ErrorMessage), "kafka audit topic unavailable") {
			t.Fatalf("%d %q", e.ErrorCode, deref(e.ErrorMessage))
		}
		if f.storedCount(t) != 0 || f.changeCount() != 0 {
			t.Fatal("applied despite a failing required sink")
		}
		// Rejections stay rejections: their events failing changes nothing.
		resp = f.alter(t, admin, false, entry(ent(dflt("ip")), set("connection_creation_rate", 0)))
		if e := resp.Entries[0]; e.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("rejection became %d", e.ErrorCode)
		}
		// An optional failing sink does not refuse anything.
		f.cq.Audit = audit.NewLogger(audit.Config{Outputs: []audit.Output{{Sink: failingSink{errors.New("x")}}}})
		f.mustAlter(t, entry(ent(dflt("ip")), set("connection_creation_rate", 5)))
	})
}

// TestQuotasAndOnChange: the engine input built from the store, handed to
// OnChange after every committing Alter.
func TestQuotasAndOnChange(t *testing.T) {
	f := newFixture(t)
	feed, cancel := f.cq.Store.Subscribe()
	defer cancel()
	f.mustAlter(t,
		entry(ent(named("user", "alice")), set("producer_byte_rate", 1024), set("request_percentage", 50)),
		entry(ent(named("user", "<default>")), set("producer_byte_rate", 7)),
		entry(ent(dflt("user"), dflt("client-id")), set("consumer_byte_rate", 2048)),
		entry(ent(named("client-id", "ingest")), set("controller_mutation_rate", 10)),
		entry(ent(named("ip", "1.2.3.4")), set("connection_creation_rate", 5)),
		entry(ent(named("ip", "10.0.0.0/8")), set("connection_creation_rate", 50)),
		entry(ent(dflt("ip")), set("connection_creation_rate", 100)),
	)
	select {
	case <-feed:
	case <-time.After(time.Second):
		t.Fatal("change feed did not fire")
	}
	if f.changeCount() != 1 {
		t.Fatalf("OnChange called %d times", f.changeCount())
	}
	q, ips := f.changes[0], f.ipChanges[0]
	check := func(e model.Entity, k model.Key, want float64) {
		t.Helper()
		if v, ok := q.Get(e, k); !ok || v != want {
			t.Errorf("%v %v = %v %v, want %v", e, k, v, ok, want)
		}
	}
	check(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1024)
	check(model.UserEntity(model.Exact("alice")), model.RequestPercentage, 50)
	check(model.UserEntity(model.Exact("<default>")), model.ProducerByteRate, 7)
	check(model.UserClientEntity(model.Default(), model.Default()), model.ConsumerByteRate, 2048)
	check(model.ClientEntity(model.Exact("ingest")), model.ControllerMutationRate, 10)
	if _, ok := q.Get(model.UserEntity(model.Default()), model.ProducerByteRate); ok {
		t.Error("literal <default> became the default user")
	}
	if q.Len() != 5 {
		t.Errorf("%d quota values", q.Len())
	}
	if len(ips) != 3 || ips["1.2.3.4"] != 5 || ips["10.0.0.0/8"] != 50 || ips[""] != 100 {
		t.Errorf("ip quotas %v", ips)
	}
	q2, ips2, err := f.cq.Quotas()
	if err != nil || q2.Len() != q.Len() || len(ips2) != len(ips) {
		t.Fatalf("Quotas(): %v %v %v", q2.Len(), ips2, err)
	}
	// A resolution through the engine's precedence.
	if r := q2.Resolve(model.ProducerByteRate, "alice", "x"); r.Quota != 1024 {
		t.Errorf("alice resolves to %v", r.Quota)
	}
	// Removing everything notifies with an empty set.
	f.mustAlter(t,
		entry(ent(named("user", "alice")), rm("producer_byte_rate"), rm("request_percentage")),
		entry(ent(named("user", "<default>")), rm("producer_byte_rate")),
		entry(ent(dflt("user"), dflt("client-id")), rm("consumer_byte_rate")),
		entry(ent(named("client-id", "ingest")), rm("controller_mutation_rate")),
		entry(ent(named("ip", "1.2.3.4")), rm("connection_creation_rate")),
		entry(ent(named("ip", "10.0.0.0/8")), rm("connection_creation_rate")),
		entry(ent(dflt("ip")), rm("connection_creation_rate")),
	)
	if f.changeCount() != 2 || f.changes[1].Len() != 0 || len(f.ipChanges[1]) != 0 {
		t.Fatalf("after removing all: %d calls, %v", f.changeCount(), f.ipChanges)
	}
}

// TestAlterDurable: the database file copied right after Alter returns, as
// a crash would leave it, has the change.
func TestAlterDurable(t *testing.T) {
	f := newFixture(t)
	f.mustAlter(t, entry(ent(named("user", "a/b=c d"), dflt("client-id")), set("producer_byte_rate", 4096)))
	cp := t.TempDir()
	src, err := os.Open(f.cq.Store.Path())
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(filepath.Join(cp, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()
	s, err := store.Open(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.ClientQuota(store.MustEntity(store.Named("user", "a/b=c d"), store.DefaultOf("client-id")))
	if err != nil || v["producer_byte_rate"] != 4096 {
		t.Fatalf("copy has %v %v", v, err)
	}
}

func TestFromConn(t *testing.T) {
	c := &principal.ConnInfo{Listener: "EXTERNAL", Remote: alice.Source, Principal: alice.Principal}
	who := FromConn(c, "cli")
	if who.Listener != "EXTERNAL" || who.ClientID != "cli" || who.Principal != alice.Principal || who.Anonymous() {
		t.Fatalf("%+v", who)
	}
	if a := who.audit(); a.Source != "10.1.2.4:50001" || a.Principal != "User:alice" {
		t.Fatalf("%+v", a)
	}
	var zero kmsg.AlterClientQuotasRequest
	if r := (&ClientQuotas{Store: newFixture(t).cq.Store}).Alter(context.Background(), anon, &zero); len(r.Entries) != 0 {
		t.Fatal("empty denied request")
	}
}

// TestStoreError: an entity the store cannot hold (its key is beyond
// bbolt's limit) is answered -1 and audited as rejected; the rest of the
// request goes on.
func TestStoreError(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("x", 20000)
	resp := f.alter(t, admin, false,
		entry(ent(named("user", long), named("client-id", long)), set("producer_byte_rate", 1)),
		entry(ent(named("user", "ok")), set("producer_byte_rate", 1)),
	)
	codes := map[int16]int{}
	for _, e := range resp.Entries {
		codes[e.ErrorCode]++
		if e.ErrorCode == -1 && !strings.HasPrefix(deref(e.ErrorMessage), "Tollgate could not store the change: ") {
			t.Fatalf("message %q", deref(e.ErrorMessage))
		}
	}
	if codes[-1] != 1 || codes[0] != 1 || f.storedCount(t) != 1 {
		t.Fatalf("codes %v, %d stored", codes, f.storedCount(t))
	}
	evs := f.events(t)
	if len(evs) != 2 || evs[0]["outcome"] != "rejected" || evs[0]["error_code"] != -1.0 || evs[1]["outcome"] != "applied" {
		t.Fatalf("events %v", evs)
	}
}

// LiveAdmins: every holder sees a Set at once, requests in flight are
// decided by one version of the list, and the caller's slice is copied.
func TestLiveAdmins(t *testing.T) {
	admins := []string{"User:admin", "alice"}
	live := NewLiveAdmins(Admins{Principals: admins})
	f := newFixture(t)
	f.cq.Authz = live
	creds := &Credentials{Store: f.cq.Store, Authz: live}
	e := entry(ent(named("user", "u")), set("producer_byte_rate", 1))
	if r := f.alter(t, alice, false, e); r.Entries[0].ErrorCode != 0 {
		t.Fatalf("alice, listed: %d", r.Entries[0].ErrorCode)
	}
	admins[1] = "mallory" // the caller's slice is not the list in force
	if !live.IsAdmin(alice.Principal) {
		t.Fatal("Set kept the caller's slice")
	}
	live.Set(Admins{Principals: []string{"User:admin"}})
	if r := f.alter(t, alice, false, e); r.Entries[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice after her removal: %d", r.Entries[0].ErrorCode)
	}
	if creds.authorize(alice, OpDescribe) || !creds.authorize(admin, OpDescribe) {
		t.Fatal("the credentials do not see the same list")
	}
	var zero LiveAdmins
	if zero.Authorize(admin, OpAlterConfigs) || !zero.Authorize(alice, OpDescribeConfigs) {
		t.Fatal("the zero LiveAdmins is not Admins{}")
	}
	// Concurrent reloads and checks (run with -race).
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					live.Authorize(alice, OpAlterConfigs)
				}
			}
		}()
	}
	for i := range 1000 {
		live.Set(Admins{Principals: []string{fmt.Sprint("User:u", i)}})
	}
	close(stop)
	wg.Wait()
}
