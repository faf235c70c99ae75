package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// ClientMetrics answers the CLIENT_METRICS config resources (KIP-714's
// client-metrics subscriptions, kafka-client-metrics.sh): DescribeConfigs,
// AlterConfigs and IncrementalAlterConfigs on them, and
// ListConfigResources (ListClientMetricsResources) of them. Tollgate
// answers its clients' GetTelemetrySubscriptions itself, so the
// subscriptions that shape those answers are its own, kept in its store
// (and, in a Tollgate cluster, its shared log), never the upstream's.
//
// Behavior, as Kafka's broker and controller:
//   - A subscription is a name and up to three configs — metrics,
//     interval.ms, match — validated by telemetry.ParseClientSubscription
//     (Kafka's ClientMetricsConfigs.validate) on the configs the change
//     leaves, with Kafka's codes and messages.
//   - IncrementalAlterConfigs: SET and DELETE; APPEND and SUBTRACT are
//     refused, as Kafka's controller refuses them. AlterConfigs replaces
//     the subscription's configs.
//   - Removing its last config removes the subscription.
//   - Describe lists a subscription's configs as Kafka 4's broker does
//     (Kafka 3.9 listed the set ones alone, without type or synonym).
//   - Authorized as Kafka authorizes them (ALTER_CONFIGS and
//     DESCRIBE_CONFIGS on the cluster): the quota admins alter, as for
//     broker configs; audited with old and new values before they are
//     committed; durable; applied at once (OnChange).
type ClientMetrics struct {
	Store *store.Store
	Audit *audit.Logger
	Authz Authorizer
	// OnChange is called with every subscription after a committed
	// change.
	OnChange func([]telemetry.ClientSubscription)

	mu sync.Mutex
}

// ConfigAlter is one op of an IncrementalAlterConfigs on a resource.
type ConfigAlter struct {
	Key   string
	Op    kmsg.IncrementalAlterConfigOp
	Value *string
}

func (m *ClientMetrics) authorize(who Initiator, op Operation) bool {
	if m.Authz == nil {
		return Admins{}.Authorize(who, op)
	}
	return m.Authz.Authorize(who, op)
}

// Subscriptions returns every stored subscription, parsed. One the store
// holds but that no longer parses (written by another build) is left out.
func (m *ClientMetrics) Subscriptions() ([]telemetry.ClientSubscription, error) {
	all, err := m.Store.ClientMetrics()
	if err != nil {
		return nil, err
	}
	out := make([]telemetry.ClientSubscription, 0, len(all))
	for _, cm := range all {
		if s, err := telemetry.ParseClientSubscription(cm.Name, cm.Values); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// List returns the subscriptions' names, sorted; ok is false when the
// initiator may not describe configs.
func (m *ClientMetrics) List(who Initiator) (names []string, ok bool, err error) {
	if !m.authorize(who, OpDescribeConfigs) {
		return nil, false, nil
	}
	all, err := m.Store.ClientMetrics()
	for _, cm := range all {
		names = append(names, cm.Name)
	}
	return names, true, err
}

// Describe returns the configs of the subscription name for a
// DescribeConfigs answer, or Kafka's error code and message. As Kafka 4's
// broker: every config of a subscription, by name, each set one with its
// value (source CLIENT_METRICS_CONFIG, itself its one synonym) and the
// others with their defaults (DEFAULT_CONFIG, no synonym); keys, when not
// nil, are the ones asked for; an unknown subscription has the defaults.
func (m *ClientMetrics) Describe(who Initiator, name string, keys []string, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, int16, string) {
	if !m.authorize(who, OpDescribeConfigs) {
		return nil, errClusterAuthorizationFailed, msgClusterAuthorizationFailed
	}
	if name == "" {
		return nil, errInvalidRequest, "Client metrics subscription name must not be empty"
	}
	vals, err := m.values(name)
	if err != nil {
		return nil, errUnknownServerError, "Tollgate could not read its store: " + err.Error()
	}
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, d := range telemetry.ClientConfigDefs {
		if keys != nil && !slices.Contains(keys, d.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = d.Name, d.Type
		if docs {
			c.Documentation = kmsg.StringPtr(d.Doc)
		}
		if v, ok := vals[d.Name]; ok {
			c.Value, c.Source = kmsg.StringPtr(v), kmsg.ConfigSourceClientMetricsConfig
			if synonyms {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = d.Name, kmsg.StringPtr(v), c.Source
				c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			}
		} else {
			c.Value, c.Source = kmsg.StringPtr(d.Default), kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, c)
	}
	return out, 0, ""
}

// values returns the stored configs of the subscription name.
func (m *ClientMetrics) values(name string) (map[string]string, error) {
	all, err := m.Store.ClientMetrics()
	for _, cm := range all {
		if cm.Name == name {
			return cm.Values, err
		}
	}
	return map[string]string{}, err
}

// Alter applies ops to the subscription name; replace is AlterConfigs'
// semantics (configs ops do not name are removed; every op is a SET or a
// DELETE). It returns Kafka's error code and message (0 on success).
func (m *ClientMetrics) Alter(ctx context.Context, who Initiator, name string, ops []ConfigAlter, replace, validateOnly bool) (int16, string) {
	ev := audit.Event{Action: audit.ActionAlterClientMetrics, Initiator: who.audit(),
		Target: audit.Target{Resource: &audit.Resource{Type: "client-metrics", Name: name}}}
	for _, op := range ops {
		ev.Changes = append(ev.Changes, audit.Change{Key: op.Key, New: strValue(op.Value)})
	}
	if !m.authorize(who, OpAlterConfigs) {
		return denied(ctx, m.Audit, ev)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, err := m.values(name)
	if err != nil {
		return errUnknownServerError, "Tollgate could not read its store: " + err.Error()
	}
	next, code, msg := applyAlters(cur, ops, replace)
	if code == 0 {
		if _, err := telemetry.ParseClientSubscription(name, next); err != nil {
			code, msg = errInvalidRequest, err.Error()
			var ce *telemetry.ConfigError
			if errors.As(err, &ce) {
				code, msg = ce.Code, ce.Message
			}
		}
	}
	if code != 0 {
		return rejected(ctx, m.Audit, ev, code, msg)
	}
	if validateOnly {
		return validated(ctx, m.Audit, ev)
	}
	var sops []store.ConfigOp
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[k]; !ok {
			sops = append(sops, store.ConfigOp{Key: k, Remove: true})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if cur[k] != next[k] || !hasKey(cur, k) {
			sops = append(sops, store.ConfigOp{Key: k, Value: next[k]})
		}
	}
	return commitAudited(ctx, m.Audit, ev, func(hook func([]store.ClientMetricsResult) error) ([]store.ClientMetricsResult, error) {
		return m.Store.SetClientMetricsFunc([]store.ClientMetricsChange{{Name: name, Ops: sops}}, hook)
	}, func(r store.ClientMetricsResult) ([]store.StringChange, bool) { return r.Changes, r.Changed }, func() {
		if subs, err := m.Subscriptions(); err == nil && m.OnChange != nil {
			m.OnChange(subs)
		}
	})
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// applyAlters returns the configs ops leave of cur (replace: those ops set
// only), as Kafka's controller computes them (ConfigurationControlManager),
// which refuses APPEND and SUBTRACT of every client-metrics config.
func applyAlters(cur map[string]string, ops []ConfigAlter, replace bool) (map[string]string, int16, string) {
	next := map[string]string{}
	if !replace {
		for k, v := range cur {
			next[k] = v
		}
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				delete(next, op.Key)
				continue
			}
			// Kafka 4.4 keeps the value trimmed (measured).
			next[op.Key] = strings.TrimSpace(*op.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Key)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			// Kafka's controller has no schema for these configs: none
			// is a LIST to it (measured on 3.9 and 4.4).
			return nil, errInvalidConfig, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", op.Op, op.Key)
		default:
			return nil, errInvalidRequest, fmt.Sprintf("Unknown alter config operation %d", op.Op)
		}
	}
	return next, 0, ""
}
