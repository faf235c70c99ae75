package control

import (
	"bufio"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	admin = Initiator{
		Principal: principal.Principal{Type: "User", Name: "admin"},
		ClientID:  "adminclient-1",
		Source:    netip.MustParseAddrPort("10.1.2.3:50000"),
		Listener:  "SASL_SSL",
	}
	alice = Initiator{
		Principal: principal.Principal{Type: "User", Name: "alice"},
		ClientID:  "app",
		Source:    netip.MustParseAddrPort("10.1.2.4:50001"),
		Listener:  "SASL_SSL",
	}
	anon = Initiator{
		Principal: principal.AnonymousPrincipal,
		Source:    netip.MustParseAddrPort("[::1]:50002"),
		Listener:  "PLAINTEXT",
	}
)

// fixture is a ClientQuotas on a real store, with a required audit file
// and a record of OnChange calls.
type fixture struct {
	cq        *ClientQuotas
	dir       string
	auditPath string
	mu        sync.Mutex
	changes   []model.Quotas
	ipChanges []IPQuotas
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	s, err := store.Open(filepath.Join(f.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.auditPath = filepath.Join(f.dir, "audit.jsonl")
	sink, err := audit.OpenFileSink(f.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	f.cq = &ClientQuotas{
		Store: s,
		Audit: audit.NewLogger(audit.Config{Outputs: []audit.Output{{Sink: sink, Required: true}}}),
		Authz: Admins{Principals: []string{"User:admin"}},
		OnChange: func(q model.Quotas, ips IPQuotas) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.changes = append(f.changes, q)
			f.ipChanges = append(f.ipChanges, ips)
		},
	}
	return f
}

func (f *fixture) changeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.changes)
}

// events reads the audit file.
func (f *fixture) events(t *testing.T) []map[string]any {
	t.Helper()
	fh, err := os.Open(f.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []map[string]any
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sp(s string) *string { return &s }

// c is an entity component as sent: name nil is the default.
type comp struct {
	typ  string
	name *string
}

func named(typ, name string) comp { return comp{typ, &name} }
func dflt(typ string) comp        { return comp{typ: typ} }

func set(key string, v float64) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, v
	return op
}

func rm(key string) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Remove = key, true
	return op
}

func entry(cs []comp, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, c := range cs {
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type, ee.Name = c.typ, c.name
		e.Entity = append(e.Entity, ee)
	}
	e.Ops = ops
	return e
}

func ent(cs ...comp) []comp { return cs }

func alterReq(validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasRequest {
	r := kmsg.NewPtrAlterClientQuotasRequest()
	r.Version = 1
	r.ValidateOnly = validateOnly
	r.Entries = entries
	return r
}

func (f *fixture) alter(t *testing.T, who Initiator, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
	t.Helper()
	return f.cq.Alter(context.Background(), who, alterReq(validateOnly, entries...))
}

// mustAlter alters as admin and fails the test on any entry error.
func (f *fixture) mustAlter(t *testing.T, entries ...kmsg.AlterClientQuotasRequestEntry) {
	t.Helper()
	resp := f.alter(t, admin, false, entries...)
	for _, e := range resp.Entries {
		if e.ErrorCode != 0 {
			t.Fatalf("alter %v: %d %v", e.Entity, e.ErrorCode, deref(e.ErrorMessage))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func describeReq(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasRequest {
	r := kmsg.NewPtrDescribeClientQuotasRequest()
	r.Version = 1
	r.Strict = strict
	r.Components = comps
	return r
}

func exact(typ, name string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchTypeExact, &name
	return c
}

func defaultOf(typ string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType = typ, kmsg.QuotasMatchTypeDefault
	return c
}

func anyOf(typ string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType = typ, kmsg.QuotasMatchTypeAny
	return c
}

func (f *fixture) describe(t *testing.T, who Initiator, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
	t.Helper()
	return f.cq.Describe(context.Background(), who, describeReq(strict, comps...))
}

// stored returns the store's values of an entity.
func (f *fixture) stored(t *testing.T, cs ...store.Component) map[string]float64 {
	t.Helper()
	v, err := f.cq.Store.ClientQuota(store.MustEntity(cs...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) storedCount(t *testing.T) int {
	t.Helper()
	all, err := f.cq.Store.ClientQuotas()
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// The quota model's messages of the client-id-prefix and per-topic
// entities (model.KeysFor), as the tests assert them.
const (
	msgPrefixAlone   = "Invalid quota entity combination, a client-id-prefix entity stands alone: it cannot be combined with user, client-id or ip"
	msgPrefixDefault = "Invalid quota entity, client-id-prefix has no default entity (a default client-id quota covers every client-id)"
	msgTopicBoth     = "Invalid quota entity combination, a quota is on a topic or on a topic-prefix, not both"
	msgTopicWith     = "Invalid quota entity combination, a topic or topic-prefix quota is for a user, a client-id-prefix or every client: it cannot be combined with client-id or ip"
	msgTopicPrefix   = "Invalid quota entity combination, a client-id-prefix cannot be combined with a user"
)

// entityNames lists the entities of a DescribeClientQuotas or
// AlterClientQuotas answer, each as "type=name;" per component in the
// answer's order.
func entityNames[C ~struct {
	Type        string
	Name        *string
	UnknownTags kmsg.Tags
}](entities [][]C) []string {
	var out []string
	for _, e := range entities {
		s := ""
		for _, c := range e {
			p := struct {
				Type        string
				Name        *string
				UnknownTags kmsg.Tags
			}(c)
			s += p.Type + "=" + deref(p.Name) + ";"
		}
		out = append(out, s)
	}
	return out
}

// describedEntities is entityNames of a DescribeClientQuotas answer.
func describedEntities(resp *kmsg.DescribeClientQuotasResponse) []string {
	es := make([][]kmsg.DescribeClientQuotasResponseEntryEntity, len(resp.Entries))
	for i, e := range resp.Entries {
		es[i] = e.Entity
	}
	return entityNames(es)
}

// describeCase is one DescribeClientQuotas filter and the entities it
// must list, in order.
type describeCase struct {
	name   string
	strict bool
	comps  []kmsg.DescribeClientQuotasRequestComponent
	want   []string
}

// describeCases sends each case's filter as the quota admin and checks the
// entities listed.
func (f *fixture) describeCases(t *testing.T, cases []describeCase) {
	t.Helper()
	for _, tc := range cases {
		resp := f.describe(t, admin, tc.strict, tc.comps...)
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: describe: %d %s", tc.name, resp.ErrorCode, deref(resp.ErrorMessage))
		}
		if got := describedEntities(resp); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// rejectCase is an AlterClientQuotas entry Kafka refuses, with its
// message.
type rejectCase struct {
	name string
	e    kmsg.AlterClientQuotasRequestEntry
	msg  string
}

// checkRejected sends each case, validate_only and not: INVALID_REQUEST
// with the case's message both times, nothing stored, both audited as
// rejected.
func checkRejected(t *testing.T, cases []rejectCase) {
	t.Helper()
	inv := kerr.InvalidRequest.Code
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			for _, vo := range []bool{true, false} {
				got := f.alter(t, admin, vo, tc.e).Entries[0]
				if got.ErrorCode != inv || deref(got.ErrorMessage) != tc.msg {
					t.Fatalf("validate_only=%v: %d %q, want %d %q", vo, got.ErrorCode, deref(got.ErrorMessage), inv, tc.msg)
				}
			}
			if n := f.storedCount(t); n != 0 {
				t.Fatalf("%d entities stored", n)
			}
			if evs := f.events(t); len(evs) != 2 || evs[1]["outcome"] != "rejected" {
				t.Fatalf("audit: %v", evs)
			}
		})
	}
}
