package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The per-topic flags of tollgate configs (--on-topic, --on-topic-prefix)
// and the alteration of an entity's quota keys, per-topic or not.

// perTopic reports whether the entity is a per-topic quota.
func (o *configsOpts) perTopic() bool { return len(o.onTopic)+len(o.onTopicPrefix) > 0 }

// topicPart is the per-topic component: its wire type and name.
func (o *configsOpts) topicPart() (string, string) {
	if len(o.onTopic) > 0 {
		return model.TypeTopic, o.onTopic[0]
	}
	return model.TypeTopicPrefix, o.onTopicPrefix[0]
}

// checkTopic checks the per-topic flags: one topic or one prefix, named,
// with a user or a client-id prefix or alone.
func (o *configsOpts) checkTopic() error {
	if !o.perTopic() {
		return nil
	}
	if len(o.onTopic) > 0 && len(o.onTopicPrefix) > 0 {
		return argErr("--on-topic and --on-topic-prefix are exclusive: a quota is on one topic or on the topics of a prefix")
	}
	if _, name := o.topicPart(); name == "" {
		return argErr("--on-topic and --on-topic-prefix need a name: there is no default topic")
	}
	for _, t := range o.entityTypes() {
		if t != usersType && t != clientPrefixesType {
			return argErr("--on-topic and --on-topic-prefix put the quota of users or client-id-prefixes on a topic (or, alone, of every client): not of %s", t)
		}
	}
	return nil
}

// alterQuotaConfigs alters the quota keys of the entity: its current
// configs first, to refuse deleting what is not set.
func alterQuotaConfigs(ctx context.Context, env *Env, cl *kgo.Client, o *configsOpts, types, names []string,
	add map[string]string, addOrder, del []string) error {
	var e entity
	filter := make([]filterComponent, len(types))
	for i, t := range types {
		p := configsPart(names[i])
		e.setPart(wireType(t), p)
		filter[i] = filterComponent{typ: wireType(t), name: &p}
	}
	if o.perTopic() {
		typ, name := o.topicPart()
		p := named(name)
		e.setPart(typ, p)
		filter = append(filter, filterComponent{typ: typ, name: &p})
	}
	current, err := describeQuotas(ctx, cl, filter)
	if err != nil {
		return err
	}
	old := map[string]float64{}
	if len(current) > 0 {
		old = current[0].values
	}
	var invalid []string
	for _, k := range del {
		if _, ok := old[k]; !ok {
			invalid = append(invalid, k)
		}
	}
	if len(invalid) > 0 {
		return argErr("Invalid config(s): %s", strings.Join(invalid, ","))
	}
	var ops []op
	for _, k := range addOrder {
		v, err := parseQuotaValue(k, add[k])
		if err != nil {
			return err
		}
		ops = append(ops, op{key: k, value: v})
	}
	for _, k := range del {
		ops = append(ops, op{key: k, remove: true})
	}
	res, err := alterQuotas(ctx, cl, []entity{e}, map[entity][]op{e: ops})
	if err != nil {
		return err
	}
	if res[0].err != nil {
		return res[0].err
	}
	var entityType, entityName string
	if len(types) > 0 {
		entityType, entityName = types[0], names[0]
	}
	if o.perTopic() {
		typ, name := o.topicPart()
		who := "every client"
		switch {
		case entityType == clientPrefixesType:
			who = "client-id-prefix " + entityName
		case entityName != "":
			who = "user " + entityName
		case entityType == usersType:
			who = "the default user"
		}
		fmt.Fprintf(env.Stdout, "Completed updating config for %s on %s %s.\n", who, typ, name)
	} else if entityType == clientPrefixesType {
		fmt.Fprintf(env.Stdout, "Completed updating config for client-id-prefix %s.\n", entityName)
	} else if entityName != "" {
		fmt.Fprintf(env.Stdout, "Completed updating config for %s %s.\n", strings.TrimSuffix(entityType, "s"), entityName)
	} else {
		fmt.Fprintf(env.Stdout, "Completed updating default config for %s in the cluster.\n", entityType)
	}
	return nil
}
