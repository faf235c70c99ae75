package audit

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Actions.
const (
	ActionAlterClientQuotas  = "alter_client_quotas"
	ActionAlterBrokerConfigs = "alter_broker_configs"
	ActionAlterClientMetrics = "alter_client_metrics"
	ActionAPIKeyCreate       = "apikey_create"
	ActionAPIKeyRevoke       = "apikey_revoke"
	// ActionAuthenticate is a failed SASL login (source address, listener
	// and mechanism; never the name tried, which would reveal users).
	ActionAuthenticate = "authenticate"
	// ActionAlterUserScramCredentials is one user's part of an
	// AlterUserScramCredentials request.
	ActionAlterUserScramCredentials = "alter_user_scram_credentials"
	// ActionTenantCreate, ActionTenantAlter and ActionTenantDelete are
	// changes to a tenant (target resource "tenant").
	ActionTenantCreate = "tenant_create"
	ActionTenantAlter  = "tenant_alter"
	ActionTenantDelete = "tenant_delete"
	// ActionDescribeClientQuotas is a DescribeClientQuotas a tenant's
	// principal was refused (it named entities outside its tenant); other
	// descriptions are not audited.
	ActionDescribeClientQuotas = "describe_client_quotas"
	// ActionDescribeUserScramCredentials is a DescribeUserScramCredentials
	// a tenant's admin was refused (it named users outside its tenant).
	ActionDescribeUserScramCredentials = "describe_user_scram_credentials"
)

// Outcome says what became of an alteration.
type Outcome string

// Outcomes.
const (
	// Applied: the change was (about to be) committed. The event is written
	// before the commit; see Failed.
	Applied Outcome = "applied"
	// Validated: a validate-only request that passed validation; nothing
	// was changed.
	Validated Outcome = "validated"
	// Rejected: the request was invalid, or was refused (e.g. because a
	// required audit sink failed); nothing was changed.
	Rejected Outcome = "rejected"
	// Denied: the initiator is not authorized; nothing was changed.
	Denied Outcome = "denied"
	// Failed: the commit of an Applied event's change failed after the
	// event was written. Supersedes names that event; nothing was changed.
	Failed Outcome = "failed"
)

// Success reports whether the outcome is one the client is answered
// without error (Applied, Validated).
func (o Outcome) Success() bool { return o == Applied || o == Validated }

// Initiator is who asked for the alteration.
type Initiator struct {
	// Principal is the authenticated principal, e.g. "User:alice" or
	// "User:ANONYMOUS".
	Principal string `json:"principal"`
	// ClientID is the request header's client id ("" for null).
	ClientID string `json:"client_id"`
	// Source is the client's address, host:port.
	Source string `json:"source"`
	// Listener is the gateway listener the request came in on.
	Listener string `json:"listener"`
}

// EntityComponent is one (type, name) pair of a client-quota entity as the
// request carried it. The default has Name null and Default true, so a name
// spelled "<default>" is never mistaken for it.
type EntityComponent struct {
	Type    string  `json:"type"`
	Name    *string `json:"name"`
	Default bool    `json:"default"`
}

// Component returns the component {typ: name}, or the default when name
// is nil (the wire's convention).
func Component(typ string, name *string) EntityComponent {
	if name == nil {
		return EntityComponent{Type: typ, Default: true}
	}
	n := *name
	return EntityComponent{Type: typ, Name: &n}
}

// Resource is a named configuration resource (a broker, a topic, an API
// key, ...).
type Resource struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// Target is what the alteration is about: a client-quota entity (in the
// request's order, unknown or repeated types included, so that a rejected
// entity is recorded as sent) or a resource.
type Target struct {
	Entity   []EntityComponent `json:"entity,omitempty"`
	Resource *Resource         `json:"resource,omitempty"`
}

// Value is a configuration value: a number (client quotas) or a string
// (broker configs). In JSON it is a number or a string; a number JSON cannot
// represent (NaN, ±Inf) is written as the string "NaN", "+Inf" or "-Inf".
type Value struct {
	num   float64
	str   string
	isStr bool
}

// Number is a numeric value.
func Number(f float64) *Value { return &Value{num: f} }

// NumberPtr is Number(*f), or nil when f is nil.
func NumberPtr(f *float64) *Value {
	if f == nil {
		return nil
	}
	return Number(*f)
}

// String is a string value.
func String(s string) *Value { return &Value{str: s, isStr: true} }

// StringPtr is String(*s), or nil when s is nil.
func StringPtr(s *string) *Value {
	if s == nil {
		return nil
	}
	return String(*s)
}

// Float returns the numeric value; ok is false for a string.
func (v Value) Float() (f float64, ok bool) { return v.num, !v.isStr }

// Str returns the string value; ok is false for a number.
func (v Value) Str() (s string, ok bool) { return v.str, v.isStr }

func (v Value) String() string {
	if v.isStr {
		return strconv.Quote(v.str)
	}
	return strconv.FormatFloat(v.num, 'g', -1, 64)
}

// MarshalJSON writes a number (shortest exact form, as encoding/json:
// 1048576, not 1.048576e+06) or a string.
func (v Value) MarshalJSON() ([]byte, error) {
	switch {
	case v.isStr:
		return json.Marshal(v.str)
	case math.IsNaN(v.num):
		return []byte(`"NaN"`), nil
	case math.IsInf(v.num, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v.num, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(v.num)
}

// UnmarshalJSON reads a number or a string. The strings written for
// non-finite numbers come back as strings.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = Value{str: s, isStr: true}
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("audit: value %s is neither a number nor a string", b)
	}
	*v = Value{num: f}
	return nil
}

// Change is one key's value before and after (nil: not set / removed). A
// rejected or denied alteration records the value it asked for as New.
type Change struct {
	Key string `json:"key"`
	Old *Value `json:"old"`
	New *Value `json:"new"`
}

// Event is one audit record.
type Event struct {
	// ID is unique and, as a string, ordered by creation time (NewID).
	// Record fills it in when empty.
	ID string `json:"id"`
	// Time is when the event was created, UTC. Record fills it in when
	// zero and converts it to UTC.
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Outcome Outcome   `json:"outcome"`
	// ErrorCode and ErrorMessage are what the client was answered (Kafka
	// error code, 0 and "" on success).
	ErrorCode    int16     `json:"error_code"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Initiator    Initiator `json:"initiator"`
	Target       Target    `json:"target"`
	Changes      []Change  `json:"changes"`
	// Supersedes is the id of an earlier event this one corrects (a Failed
	// event names the Applied event whose commit failed).
	Supersedes string `json:"supersedes,omitempty"`
	// Aggregate is set on an event that stands for several denials (see
	// Config.AggregateInterval); nil on every other event.
	Aggregate *Aggregate `json:"aggregate,omitempty"`
}

// NewID returns a 128-bit id as 32 hex digits: 48 bits of Unix milliseconds
// then 80 random bits (the ULID layout), so ids sort by time to the
// millisecond and never collide in practice.
func NewID(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}

// MarshalJSON encodes the event with Time in RFC 3339 with nanoseconds, UTC,
// and an empty change list as [] rather than null.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	p := plain(e)
	p.Time = p.Time.UTC()
	if p.Changes == nil {
		p.Changes = []Change{}
	}
	return json.Marshal(p)
}
