package control

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/store"
)

// BrokerConfigs answers the part of DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs on BROKER resources that concerns the settings
// Tollgate owns: its connection limits (KIP-402, KIP-612). The rest of
// those requests goes to the upstream cluster; the caller splits requests
// and merges the answers.
//
// Behavior:
//   - Owned keys: max.connections, max.connections.per.ip,
//     max.connections.per.ip.overrides, max.connection.creation.rate,
//     listener.name.<l>.max.connections and
//     listener.name.<l>.max.connection.creation.rate.
//   - Precedence as Kafka's: a value set through the API (dynamic) beats the
//     config file (static), which beats Kafka's default.
//   - Alterations are authorized like AlterClientQuotas (quota admins),
//     validated with Kafka's messages (INVALID_CONFIG), audited with old and
//     new values before they are committed, durable, and applied at once.
//   - AlterConfigs (non-incremental) replaces the resource's whole dynamic
//     config: owned keys it does not name are removed, as in Kafka.
//
// Where Tollgate differs from Kafka:
//   - Tollgate is every broker to its clients, so its limits are
//     gateway-wide: a value set on one broker id applies to the gateway as
//     a whole, like the cluster default, and is described for every id.
//   - Describing an owned key shows Tollgate's value; the upstream broker's
//     own value of that key (which limits the gateway's connections to it)
//     is not shown.
type BrokerConfigs struct {
	Store *store.Store
	Audit *audit.Logger
	Authz Authorizer
	// Static returns the config file's values of owned keys.
	Static func() map[string]string
	// Defaults are Kafka's default values of owned keys, for describe.
	Defaults map[string]string
	// Validate checks a candidate set of effective values (file and
	// dynamic together), returning Kafka's message for the first bad one.
	Validate func(effective map[string]string) error
	// OnChange is called with the dynamic values after a committed change.
	OnChange func(dynamic map[string]string)

	mu sync.Mutex
}

// IsOwnedBrokerConfig reports whether Tollgate, not the upstream cluster,
// owns a broker config key.
func IsOwnedBrokerConfig(name string) bool {
	switch name {
	case "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate":
		return true
	}
	if rest, ok := strings.CutPrefix(name, "listener.name."); ok {
		return strings.HasSuffix(rest, ".max.connections") || strings.HasSuffix(rest, ".max.connection.creation.rate")
	}
	return false
}

// Dynamic returns the values set through the API.
func (b *BrokerConfigs) Dynamic() (map[string]string, error) {
	all, err := b.Store.BrokerConfigs()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, bc := range all {
		if bc.Broker.Default {
			for k, v := range bc.Values {
				out[k] = v
			}
		}
	}
	return out, nil
}

func (b *BrokerConfigs) authorize(who Initiator, op Operation) bool {
	if b.Authz == nil {
		return Admins{}.Authorize(who, op)
	}
	return b.Authz.Authorize(who, op)
}

// Describe returns the owned configs of a BROKER resource (resource: a
// broker id, or "" for the cluster default) for a DescribeConfigs response
// at the given version: the names asked for (all owned keys when names is
// nil), each with its value and source. The cluster default, as Kafka
// describes it, holds only what is set on it dynamically, each with that
// one synonym. ok is false when the initiator may not describe.
func (b *BrokerConfigs) Describe(who Initiator, resource string, names []string, version int16) ([]kmsg.DescribeConfigsResponseResourceConfig, bool, error) {
	if !b.authorize(who, OpDescribeConfigs) {
		return nil, false, nil
	}
	dyn, err := b.Dynamic()
	if err != nil {
		return nil, true, err
	}
	static := map[string]string{}
	if b.Static != nil {
		static = b.Static()
	}
	keys := names
	if keys == nil {
		keys = allKeys(b.Defaults, static, dyn)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range keys {
		if !IsOwnedBrokerConfig(k) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k
		c.ConfigType = kmsg.ConfigTypeInt
		if k == "max.connections.per.ip.overrides" {
			c.ConfigType = kmsg.ConfigTypeString
		}
		var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		addSyn := func(v string, src kmsg.ConfigSource) {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = k, kmsg.StringPtr(v), src
			syn = append(syn, s)
		}
		switch {
		case resource == "" && dyn[k] == "":
			continue // the cluster default lists its dynamic configs only
		case resource == "":
			c.Value, c.Source = kmsg.StringPtr(dyn[k]), kmsg.ConfigSourceDynamicDefaultBrokerConfig
			addSyn(dyn[k], kmsg.ConfigSourceDynamicDefaultBrokerConfig)
			if version >= 1 {
				c.ConfigSynonyms = syn
			}
			out = append(out, c)
			continue
		case dyn[k] != "":
			c.Value, c.Source = kmsg.StringPtr(dyn[k]), kmsg.ConfigSourceDynamicDefaultBrokerConfig
			addSyn(dyn[k], kmsg.ConfigSourceDynamicDefaultBrokerConfig)
			if v, ok := static[k]; ok {
				addSyn(v, kmsg.ConfigSourceStaticBrokerConfig)
			}
		case static[k] != "":
			c.Value, c.Source = kmsg.StringPtr(static[k]), kmsg.ConfigSourceStaticBrokerConfig
			addSyn(static[k], kmsg.ConfigSourceStaticBrokerConfig)
		case names == nil && strings.HasPrefix(k, "listener.name."):
			// Not one of Kafka's config names: a broker lists a
			// listener's key only once it is set.
			continue
		default:
			d, ok := b.Defaults[k]
			if !ok {
				continue // an unknown listener's key, never set
			}
			c.Value, c.Source, c.IsDefault = kmsg.StringPtr(d), kmsg.ConfigSourceDefaultConfig, true
		}
		// A broker's resource lists the default as a synonym of every
		// key, its own source included (measured against Kafka 3.9/4.4).
		if d, ok := b.Defaults[k]; ok {
			addSyn(d, kmsg.ConfigSourceDefaultConfig)
		}
		if version >= 1 {
			c.ConfigSynonyms = syn
		}
		out = append(out, c)
	}
	return out, true, nil
}

// allKeys is every key of the maps, sorted.
func allKeys(ms ...map[string]string) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Change is one owned key to set (Value non-nil) or delete.
type Change struct {
	Key   string
	Value *string
}

// Alter applies changes to the owned configs of one BROKER resource (named
// resource: "" or a broker id, for the audit). replace is AlterConfigs'
// semantics: owned keys not in changes are deleted. It returns Kafka's
// error code and message for the resource (0 on success).
func (b *BrokerConfigs) Alter(ctx context.Context, who Initiator, resource string, changes []Change, replace, validateOnly bool) (int16, string) {
	target := audit.Target{Resource: &audit.Resource{Type: "broker", Name: resource}}
	ev := audit.Event{Action: audit.ActionAlterBrokerConfigs, Initiator: who.audit(), Target: target}
	for _, c := range changes {
		ev.Changes = append(ev.Changes, audit.Change{Key: c.Key, New: strValue(c.Value)})
	}
	if !b.authorize(who, OpAlterConfigs) {
		return denied(ctx, b.Audit, ev)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	dyn, err := b.Dynamic()
	if err != nil {
		return errUnknownServerError, "Tollgate could not read its store: " + err.Error()
	}
	next, ops, removed := planConfigs(dyn, changes, replace)
	for _, k := range removed {
		ev.Changes = append(ev.Changes, audit.Change{Key: k})
	}
	if err := b.validate(next); err != nil {
		// Kafka's broker refuses a dynamic broker config it cannot take
		// with INVALID_REQUEST and the ConfigException's message.
		return rejected(ctx, b.Audit, ev, errInvalidRequest, kafkaMessage(err))
	}
	if validateOnly {
		return validated(ctx, b.Audit, ev)
	}
	return b.commit(ctx, ev, ops)
}

// planConfigs returns the owned configs changes leave of dyn (replace:
// those changes set only), the store's ops that make them, and the keys
// replace removes that changes do not name.
func planConfigs(dyn map[string]string, changes []Change, replace bool) (next map[string]string, ops []store.ConfigOp, removed []string) {
	next = map[string]string{}
	if !replace {
		for k, v := range dyn {
			next[k] = v
		}
	}
	ops = []store.ConfigOp{}
	if replace {
		for k := range dyn {
			if !slices.ContainsFunc(changes, func(c Change) bool { return c.Key == k }) {
				ops = append(ops, store.ConfigOp{Key: k, Remove: true})
				removed = append(removed, k)
			}
		}
	}
	for _, c := range changes {
		if c.Value == nil {
			delete(next, c.Key)
			ops = append(ops, store.ConfigOp{Key: c.Key, Remove: true})
			continue
		}
		next[c.Key] = *c.Value
		ops = append(ops, store.ConfigOp{Key: c.Key, Value: *c.Value})
	}
	return next, ops, removed
}

// validate checks the effective configs next would make, the static ones
// under the owned ones, with b.Validate.
func (b *BrokerConfigs) validate(next map[string]string) error {
	if b.Validate == nil {
		return nil
	}
	eff := map[string]string{}
	if b.Static != nil {
		for k, v := range b.Static() {
			eff[k] = v
		}
	}
	for k, v := range next {
		eff[k] = v
	}
	return b.Validate(eff)
}

// commit writes ops to the store once ev, with the changes the store
// reports, is recorded, and reports the new configs if they changed.
func (b *BrokerConfigs) commit(ctx context.Context, ev audit.Event, ops []store.ConfigOp) (int16, string) {
	return commitAudited(ctx, b.Audit, ev, func(hook func([]store.BrokerResult) error) ([]store.BrokerResult, error) {
		return b.Store.SetBrokerConfigsFunc([]store.BrokerChange{{Broker: store.BrokerDefault(), Ops: ops}}, hook)
	}, func(r store.BrokerResult) ([]store.StringChange, bool) { return r.Changes, r.Changed }, func() {
		if d, err := b.Dynamic(); err == nil && b.OnChange != nil {
			b.OnChange(d)
		}
	})
}

func strValue(s *string) *audit.Value {
	if s == nil {
		return nil
	}
	return audit.String(*s)
}

// kafkaMessage is the message Kafka's broker gives for a config it
// refuses: the first innermost error's (the validator wraps them in the
// config file's context, which a Kafka client never sees), or what the
// error says Kafka's would be (KafkaMessage).
func kafkaMessage(err error) string {
	for {
		if km, ok := err.(interface{ KafkaMessage() string }); ok {
			return km.KafkaMessage()
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
			err = j.Unwrap()[0]
			continue
		}
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
