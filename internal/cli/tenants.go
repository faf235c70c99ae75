package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/api"
)

const tenantsUsage = `usage: tollgate tenants <command> [NAME] [flags]

commands:
  list              list the tenants: who belongs, their ceilings and admins, how full they are
  describe NAME     one tenant: its definition, each ceiling's use, each principal's part
  create NAME       make a tenant
  alter NAME        change one
  delete NAME       delete one

flags of create (each list flag may be repeated, one entry each):
  --principal NAME            a principal that belongs (alice for User:alice)
  --principal-prefix P        every principal whose name starts with P belongs
  --principal-rule RULE       a principal mapping rule (RULE:pattern/replacement/[LU]): a principal
                              belongs when it maps its name to the tenant's name
  --admin PRINCIPAL           may alter and describe the tenant's principals' quotas (Kafka API)
  --add-config K=V[,K=V]      producer_byte_rate, consumer_byte_rate, controller_mutation_rate
                              (the ceilings), shadow=1, burst_seconds

flags of alter: --add-principal, --remove-principal, --add-principal-prefix,
  --remove-principal-prefix, --add-principal-rule, --remove-principal-rule, --add-admin,
  --remove-admin (repeatable), --add-config K=V[,K=V], --delete-config K[,K]

` + adminFlagsUsage + `
A tenant's principals share its ceilings: each is held by its own quota and by
the tenant's, the tightest wins; while a ceiling binds, each active principal
is guaranteed the ceiling ÷ the active principals, and what some leave idle the
others may use. See docs/quotas.md.

These commands use Tollgate's admin HTTP API (/api/v1/tenants). Changing
tenants needs a key of a quota admin (authorization.quota_admins), reading any
key; tenants declared in the config file change there only.
`

// Tenants is `tollgate tenants list|describe|create|alter|delete`.
func Tenants(args []string, stdout, stderr io.Writer) int {
	return runTenants(context.Background(), osEnv(stdout, stderr), args)
}

// listFlag is a repeatable flag: one entry per occurrence (a principal
// may contain commas: a certificate's DN).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runTenants(ctx context.Context, env *Env, args []string) int {
	ac, code, done := newAdminCommand(env, "tenants", tenantsUsage, args, "list", "describe", "create", "alter", "delete")
	if done {
		return code
	}
	cmd := ac.name
	var tf tenantFlags
	tf.register(ac.fs, cmd)
	pos, code, ok := parseInterleaved(ac.fs, args[1:])
	if !ok {
		return code
	}
	switch {
	case cmd == "list" && len(pos) > 0:
		return ac.fail(env, "unexpected argument %q", pos[0])
	case cmd != "list" && len(pos) != 1:
		return ac.fail(env, "give the tenant's name (tollgate tenants list shows them)")
	}
	set, err := parseConfigs(tf.addConfig)
	if err != nil {
		return ac.fail(env, "--add-config: %v", err)
	}
	return ac.run(ctx, env, func(ctx context.Context, c *adminClient) error {
		switch cmd {
		case "list":
			return c.listTenants(ctx, env)
		case "describe":
			return c.describeTenant(ctx, env, pos[0])
		case "create":
			b := tf.spec(pos[0])
			if err := applyConfigs(&b, set); err != nil {
				return commandLineError{fmt.Errorf("--add-config: %v", err)}
			}
			return c.createTenant(ctx, env, b)
		case "alter":
			return c.alterTenant(ctx, env, pos[0], tf.alter(set))
		}
		return c.deleteTenant(ctx, env, pos[0])
	})
}

// tenantFlags are the flags of tenants create and alter.
type tenantFlags struct {
	// create's
	principals, prefixes, rules, admins listFlag
	// alter's
	addP, rmP, addPre, rmPre, addR, rmR, addA, rmA listFlag
	deleteConfig                                   string
	// both's
	addConfig string
}

// register declares on fs the flags of cmd.
func (tf *tenantFlags) register(fs *flag.FlagSet, cmd string) {
	creating, altering := cmd == "create", cmd == "alter"
	if creating {
		fs.Var(&tf.principals, "principal", "a principal that belongs (repeatable)")
		fs.Var(&tf.prefixes, "principal-prefix", "a principal name prefix (repeatable)")
		fs.Var(&tf.rules, "principal-rule", "a principal mapping rule (repeatable)")
		fs.Var(&tf.admins, "admin", "a principal administering the tenant (repeatable)")
	}
	if altering {
		for _, f := range []struct {
			name string
			v    *listFlag
		}{{"add-principal", &tf.addP}, {"remove-principal", &tf.rmP}, {"add-principal-prefix", &tf.addPre}, {"remove-principal-prefix", &tf.rmPre},
			{"add-principal-rule", &tf.addR}, {"remove-principal-rule", &tf.rmR}, {"add-admin", &tf.addA}, {"remove-admin", &tf.rmA}} {
			fs.Var(f.v, f.name, "repeatable")
		}
		fs.StringVar(&tf.deleteConfig, "delete-config", "", "`keys` to remove, comma-separated")
	}
	if creating || altering {
		fs.StringVar(&tf.addConfig, "add-config", "", "`K=V[,K=V]`: ceilings, shadow=1, burst_seconds")
	}
}

// spec is the tenant create's flags define, its configs aside
// (applyConfigs).
func (tf *tenantFlags) spec(name string) api.TenantSpec {
	return api.TenantSpec{Name: name, Principals: tf.principals, PrincipalPrefixes: tf.prefixes, PrincipalRules: tf.rules, Admins: tf.admins}
}

// alter is the change alter's flags ask for, with set, the configs
// --add-config sets.
func (tf *tenantFlags) alter(set map[string]float64) api.TenantAlter {
	var del []string
	if tf.deleteConfig != "" {
		del = strings.Split(tf.deleteConfig, ",")
	}
	return api.TenantAlter{AddPrincipals: tf.addP, RemovePrincipals: tf.rmP, AddPrincipalPrefixes: tf.addPre, RemovePrincipalPrefixes: tf.rmPre,
		AddPrincipalRules: tf.addR, RemovePrincipalRules: tf.rmR, AddAdmins: tf.addA, RemoveAdmins: tf.rmA, Set: set, Delete: del}
}

func (c *adminClient) createTenant(ctx context.Context, env *Env, b api.TenantSpec) error {
	var out api.Tenant
	if err := c.do(ctx, "POST", "/api/v1/tenants", b, http.StatusCreated, &out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Created tenant %s.\n", out.Name)
	return nil
}

func (c *adminClient) alterTenant(ctx context.Context, env *Env, name string, a api.TenantAlter) error {
	var out api.Tenant
	if err := c.do(ctx, "PATCH", "/api/v1/tenants/"+url.PathEscape(name), a, http.StatusOK, &out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Altered tenant %s.\n", out.Name)
	return nil
}

func (c *adminClient) deleteTenant(ctx context.Context, env *Env, name string) error {
	var out api.TenantDeleted
	if err := c.do(ctx, "DELETE", "/api/v1/tenants/"+url.PathEscape(name), nil, http.StatusOK, &out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Deleted tenant %s.\n", name)
	return nil
}

// parseConfigs reads K=V[,K=V] into numbers.
func parseConfigs(s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not K=V", kv)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", k, v)
		}
		out[k] = f
	}
	return out, nil
}

// applyConfigs puts --add-config's keys into a new tenant.
func applyConfigs(b *api.TenantSpec, set map[string]float64) error {
	for k, v := range set {
		switch k {
		case "producer_byte_rate":
			b.ProducerByteRate = &v
		case "consumer_byte_rate":
			b.ConsumerByteRate = &v
		case "controller_mutation_rate":
			b.ControllerMutationRate = &v
		case "producer_ids_rate":
			b.ProducerIDsRate = &v
		case "shadow":
			if v != 1 {
				return errors.New("shadow must be 1")
			}
			b.Shadow = true
		case "burst_seconds":
			b.BurstSeconds = &v
		default:
			return fmt.Errorf("unknown key %s (want producer_byte_rate, consumer_byte_rate, controller_mutation_rate, producer_ids_rate, shadow or burst_seconds)", k)
		}
	}
	return nil
}

// ceilings renders a tenant's ceilings as K=V,K=V.
func ceilings(b api.TenantSpec) string {
	var parts []string
	for _, kv := range []struct {
		k string
		v *float64
	}{{"producer_byte_rate", b.ProducerByteRate}, {"consumer_byte_rate", b.ConsumerByteRate}, {"controller_mutation_rate", b.ControllerMutationRate}, {"producer_ids_rate", b.ProducerIDsRate}} {
		if kv.v != nil {
			parts = append(parts, kv.k+"="+strconv.FormatFloat(*kv.v, 'f', -1, 64))
		}
	}
	if b.Shadow {
		parts = append(parts, "shadow=1")
	}
	if b.BurstSeconds != nil {
		parts = append(parts, "burst_seconds="+strconv.FormatFloat(*b.BurstSeconds, 'f', -1, 64))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// members renders who belongs to a tenant.
func members(b api.TenantSpec) string {
	var parts []string
	parts = append(parts, b.Principals...)
	for _, p := range b.PrincipalPrefixes {
		parts = append(parts, p+"*")
	}
	parts = append(parts, b.PrincipalRules...)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func orDash(vs []string) string {
	if len(vs) == 0 {
		return "-"
	}
	return strings.Join(vs, " ")
}

func (c *adminClient) listTenants(ctx context.Context, env *Env) error {
	return listTable(ctx, c, env, "/api/v1/tenants", "No tenants.", "TENANT\tSOURCE\tPRINCIPALS\tCEILINGS\tADMINS\tUSE", func(body api.Tenants) (rows [][]string) {
		for _, t := range body.Tenants {
			var use []string
			for _, u := range t.Usage {
				use = append(use, fmt.Sprintf("%s %.0f%%", shortKey(u.Quota), 100*u.Utilization))
			}
			rows = append(rows, []string{t.Name, t.Source, members(t.TenantSpec), ceilings(t.TenantSpec), orDash(t.Admins), orDash(use)})
		}
		return rows
	})
}

func shortKey(k string) string {
	switch k {
	case "producer_byte_rate":
		return "produce"
	case "consumer_byte_rate":
		return "fetch"
	case "controller_mutation_rate":
		return "mutations"
	}
	return k
}

func (c *adminClient) describeTenant(ctx context.Context, env *Env, name string) error {
	var t api.TenantDetail
	if err := c.do(ctx, "GET", "/api/v1/tenants/"+url.PathEscape(name), nil, http.StatusOK, &t); err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "Tenant %s (declared in the %s)\n", t.Name, map[string]string{"config": "config file", "api": "admin API"}[t.Source])
	fmt.Fprintf(w, "  principals:         %s\n", orDash(t.Principals))
	fmt.Fprintf(w, "  principal prefixes: %s\n", orDash(t.PrincipalPrefixes))
	fmt.Fprintf(w, "  principal rules:    %s\n", orDash(t.PrincipalRules))
	fmt.Fprintf(w, "  ceilings:           %s\n", ceilings(t.TenantSpec))
	fmt.Fprintf(w, "  admins:             %s\n", orDash(t.Admins))
	if len(t.Usage) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w, "QUOTA\tCEILING\tRATE\tUSE\tACTIVE\tFAIR SHARE\tTHROTTLED")
		for _, u := range t.Usage {
			thr := fmt.Sprintf("%d (%dms)", u.Throttled, u.ThrottleMs)
			if u.Shadow && u.Shadowed != nil {
				thr = fmt.Sprintf("shadow: would have throttled %.1f %% of %d requests, by up to %dms", u.Shadowed.ThrottledPercent, u.Shadowed.Records, u.Shadowed.ThrottleMsMax)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f%%\t%d\t%.0f\t%s\n", u.Quota, strconv.FormatFloat(u.Ceiling, 'f', -1, 64), u.Rate, 100*u.Utilization,
				u.Active, u.FairShare, thr)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(t.Members) > 0 {
		fmt.Fprintln(w) // the API lists them by principal
		tw := newTable(w, "PRINCIPAL\tQUOTA\tACTIVE\tCHARGED RATE\tTHROTTLED")
		for _, m := range t.Members {
			active := "no"
			if m.Active {
				active = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d (%dms)\n", m.Principal, m.Quota, active, m.ChargedRate, m.Throttled, m.ThrottleMs)
		}
		return tw.Flush()
	}
	return nil
}
