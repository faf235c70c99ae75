package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokersType is kafka-configs' --entity-type brokers: broker-level
// dynamic configs, for Tollgate its connection limits (and, through it,
// the upstream cluster's own broker configs).
const brokersType = "brokers"

// brokerIDs turns the entity names into broker ids; "" (--entity-default)
// is the cluster default, which kadm addresses with no ids.
func brokerIDs(names []string) ([]int32, error) {
	var ids []int32
	for _, n := range names {
		if n == "" {
			continue
		}
		id, err := strconv.ParseInt(n, 10, 32)
		if err != nil || id < 0 {
			return nil, argErr("The entity name for brokers must be a valid integer broker id, but it is: %s", n)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

func describeBrokers(ctx context.Context, env *Env, cl *kgo.Client, o *configsOpts) error {
	ids, err := brokerIDs(o.entityNames())
	if err != nil {
		return err
	}
	rs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, ids...)
	if err != nil && len(rs) == 0 {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return &serverError{err: r.Err, msg: r.ErrMessage}
		}
		var title string
		switch {
		case r.Name == "" && o.all:
			title = "All configs for brokers in the cluster are:"
		case r.Name == "":
			title = "Default configs for brokers in the cluster are:"
		case o.all:
			title = "All configs for broker " + r.Name + " are:"
		default:
			title = "Dynamic configs for broker " + r.Name + " are:"
		}
		fmt.Fprintln(env.Stdout, title)
		want := kmsg.ConfigSourceDynamicBrokerConfig
		if r.Name == "" {
			want = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		}
		cfgs := slices.Clone(r.Configs)
		slices.SortFunc(cfgs, func(a, b kadm.Config) int { return strings.Compare(a.Key, b.Key) })
		for _, c := range cfgs {
			if !o.all && c.Source != want {
				continue
			}
			var syn []string
			for _, s := range c.Synonyms {
				v := ""
				if s.Value != nil {
					v = *s.Value
				}
				syn = append(syn, s.Source.String()+":"+s.Key+"="+v)
			}
			fmt.Fprintf(env.Stdout, "  %s=%s sensitive=%v synonyms={%s}\n", c.Key, c.MaybeValue(), c.Sensitive, strings.Join(syn, ", "))
		}
	}
	return nil
}

func alterBrokers(ctx context.Context, env *Env, cl *kgo.Client, o *configsOpts, add map[string]string, addOrder []string) error {
	ids, err := brokerIDs(o.entityNames())
	if err != nil {
		return err
	}
	var ops []kadm.AlterConfig
	for _, k := range addOrder {
		v := add[k]
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range o.deleteConfig {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	rs, err := kadm.NewClient(cl).AlterBrokerConfigs(ctx, ops, ids...)
	if err != nil && len(rs) == 0 {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return &serverError{err: r.Err, msg: r.ErrMessage}
		}
	}
	if len(ids) == 0 {
		fmt.Fprintln(env.Stdout, "Completed updating default config for brokers in the cluster.")
	} else {
		fmt.Fprintf(env.Stdout, "Completed updating config for broker %d.\n", ids[0])
	}
	return nil
}
