package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// Entity types of kafka-configs' --entity-type, and Tollgate's
// client-id-prefixes (Redpanda's client-id-prefix entity, which kafka-configs
// does not know).
const (
	usersType          = "users"
	clientsType        = "clients"
	ipsType            = "ips"
	clientPrefixesType = "client-id-prefixes"
)

// kafkaOnlyTypes are entity types kafka-configs knows that are not client
// quotas.
var kafkaOnlyTypes = []string{"topics", "broker-loggers", "client-metrics", "groups"}

// configsOpts are the parsed flags of `tollgate configs`, in the model of
// kafka-configs' ConfigCommandOptions.
type configsOpts struct {
	args []string // as given, for error messages

	bootstrap     []string
	commandConfig string
	describe      int
	alter         int
	all           bool

	// typeFlags are the --entity-type values; specNames are the
	// --entity-name values and "" for each --entity-default, in the order
	// they appeared (kafka-configs pairs them with the types by position).
	typeFlags        []string
	specNames        []string
	hasEntityName    bool
	hasEntityDefault bool

	addConfig     []string
	addConfigFile []string
	deleteConfig  []string
	hasDelete     bool

	// The shorthand entity flags.
	user, client, ip, clientPrefix           []string
	userDefaults, clientDefaults, ipDefaults bool
	// onTopic and onTopicPrefix make the entity a per-topic quota
	// (Tollgate's topic and topic-prefix components): of the user or
	// client-id prefix given, or of every client when alone.
	onTopic, onTopicPrefix []string

	unsupported []string // Kafka flags for what is not a client quota
}

const configsUsage = `usage: tollgate configs --bootstrap-server HOST:PORT [--command-config FILE]
         (--describe | --alter) ENTITY [--add-config K=V,...] [--delete-config K,...]

Describe and alter client quotas with the flags and the output of Apache
Kafka's kafka-configs.sh. It is a Kafka admin client: it works against
Tollgate and against any Kafka cluster.

ENTITY is one of
  --entity-type users   --entity-name USER | --entity-default
  --entity-type clients --entity-name CLIENT-ID | --entity-default
  --entity-type users --entity-name USER --entity-type clients --entity-name CLIENT-ID
  --entity-type ips     --entity-name IP | --entity-default
  --entity-type client-id-prefixes --entity-name PREFIX   (Tollgate, Redpanda)
or the shorthands --user USER, --client CLIENT-ID, --ip IP,
--client-id-prefix PREFIX, --user-defaults, --client-defaults, --ip-defaults.
Names pair with types in order; with --describe a type without a name lists
every entity of that type. With --alter, --entity-type ips alone means the
default ip (KIP-612). A client-id prefix is one quota shared by every
client-id that starts with it; it has no default and stands alone.

Per-topic quotas (Tollgate): --on-topic TOPIC or --on-topic-prefix PREFIX
puts the quota of a user (named or default) or a client-id prefix on that
topic, or on every topic starting with the prefix (one bucket for them all);
alone, of every client together. They take producer_byte_rate,
consumer_byte_rate, shadow and burst_seconds:
  --alter --user alice --on-topic orders --add-config producer_byte_rate=1048576
  --alter --on-topic-prefix logs- --add-config consumer_byte_rate=4194304
  --describe --on-topic orders        (every per-topic quota on orders)

flags:
  --bootstrap-server HOST:PORT[,...]  the servers to connect to (required)
  --command-config FILE               Kafka client properties: security.protocol,
                                      sasl.mechanism, sasl.jaas.config, ssl.* (PEM)
  --describe                          list the quota configs of the entity
  --alter                             alter the quota configs of the entity
  --add-config K=V[,K=V]              quotas to set: producer_byte_rate,
                                      consumer_byte_rate, request_percentage,
                                      controller_mutation_rate (users, clients,
                                      client-id-prefixes),
                                      connection_creation_rate (ips); and
                                      Tollgate's shadow=1 (measured, not
                                      enforced; delete it to enforce) and
                                      burst_seconds=S (start-up burst, 0-3600)
  --add-config-file FILE              properties file of quotas to set
  --delete-config K[,K]               quotas to remove
`

const configsHint = "Run 'tollgate configs --help' for usage."

func parseConfigsArgs(args []string, stdout io.Writer) (*configsOpts, error, bool) {
	o := &configsOpts{args: args}
	fs := flag.NewFlagSet("configs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	str := func(name string, dst *[]string) {
		fs.Func(name, "", func(v string) error { *dst = append(*dst, v); return nil })
	}
	boolean := func(name string, fn func()) {
		fs.BoolFunc(name, "", func(string) error { fn(); return nil })
	}
	str("bootstrap-server", &o.bootstrap)
	fs.Func("command-config", "", func(v string) error { o.commandConfig = v; return nil })
	boolean("describe", func() { o.describe++ })
	boolean("alter", func() { o.alter++ })
	boolean("all", func() { o.all = true })
	str("entity-type", &o.typeFlags)
	fs.Func("entity-name", "", func(v string) error {
		o.specNames = append(o.specNames, v)
		o.hasEntityName = true
		return nil
	})
	boolean("entity-default", func() {
		o.specNames = append(o.specNames, "")
		o.hasEntityDefault = true
	})
	str("add-config", &o.addConfig)
	str("add-config-file", &o.addConfigFile)
	fs.Func("delete-config", "", func(v string) error {
		o.hasDelete = true
		for _, k := range strings.Split(v, ",") {
			o.deleteConfig = append(o.deleteConfig, strings.TrimSpace(k))
		}
		return nil
	})
	str("user", &o.user)
	str("client", &o.client)
	str("ip", &o.ip)
	str("client-id-prefix", &o.clientPrefix)
	str("on-topic", &o.onTopic)
	str("on-topic-prefix", &o.onTopicPrefix)
	boolean("user-defaults", func() { o.userDefaults = true })
	boolean("client-defaults", func() { o.clientDefaults = true })
	boolean("ip-defaults", func() { o.ipDefaults = true })
	for _, name := range []string{"topic", "broker", "broker-logger", "group", "client-metrics", "bootstrap-controller"} {
		fs.Func(name, "", func(string) error { o.unsupported = append(o.unsupported, "--"+name); return nil })
	}
	boolean("broker-defaults", func() { o.unsupported = append(o.unsupported, "--broker-defaults") })
	help := false
	fs.BoolVar(&help, "help", false, "")
	fs.BoolVar(&help, "h", false, "")

	if err := fs.Parse(args); err != nil {
		return nil, err, false
	}
	if help {
		fmt.Fprint(stdout, configsUsage)
		return nil, nil, true
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0)), false
	}
	return o, nil, false
}

// entityTypes is ConfigCommandOptions.entityTypes: the --entity-type values,
// then the types of the shorthand flags in kafka-configs' order.
func (o *configsOpts) entityTypes() []string {
	out := slices.Clone(o.typeFlags)
	if len(o.client) > 0 {
		out = append(out, clientsType)
	}
	if len(o.user) > 0 {
		out = append(out, usersType)
	}
	if len(o.ip) > 0 {
		out = append(out, ipsType)
	}
	if len(o.clientPrefix) > 0 {
		out = append(out, clientPrefixesType)
	}
	if o.clientDefaults {
		out = append(out, clientsType)
	}
	if o.userDefaults {
		out = append(out, usersType)
	}
	if o.ipDefaults {
		out = append(out, ipsType)
	}
	return out
}

// entityNames is ConfigCommandOptions.entityNames: "" is the default.
func (o *configsOpts) entityNames() []string {
	out := slices.Clone(o.specNames)
	for _, v := range [][]string{o.client, o.user, o.ip, o.clientPrefix} {
		if len(v) > 0 {
			out = append(out, v[0])
		}
	}
	for _, d := range []bool{o.clientDefaults, o.userDefaults, o.ipDefaults} {
		if d {
			out = append(out, "")
		}
	}
	return out
}

func (o *configsOpts) hasShorthand() bool {
	return len(o.user)+len(o.client)+len(o.ip)+len(o.clientPrefix) > 0 || o.userDefaults || o.clientDefaults || o.ipDefaults
}

// usageError is an invalid command line: kafka-configs prints the message
// (and, for some, the usage) and exits with 1.
type usageError struct {
	msg       string
	showUsage bool
}

func (e *usageError) Error() string { return e.msg }

func argErr(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// check is ConfigCommandOptions.checkArgs plus processCommand's checks,
// in kafka-configs' order and with its messages.
func (o *configsOpts) check() error {
	if err := o.checkFlags(); err != nil {
		return err
	}
	types := o.entityTypes()
	seen, err := distinctTypes(types)
	if err != nil {
		return err
	}
	if len(o.bootstrap) == 0 {
		return argErr("Either --bootstrap-server or --bootstrap-controller must be specified.")
	}
	if err := o.checkTypes(types, seen); err != nil {
		return err
	}
	names := o.entityNames()
	if err := checkNames(types, seen, names); err != nil {
		return err
	}
	if o.alter > 0 {
		return o.checkAlter(types, names)
	}
	if len(o.entityNames()) > len(types) {
		return argErr(moreNames)
	}
	return nil
}

// checkFlags checks the flags one by one and the action they ask for.
func (o *configsOpts) checkFlags() error {
	for _, f := range [][]string{o.bootstrap, o.addConfig, o.user, o.client, o.ip, o.clientPrefix, o.onTopic, o.onTopicPrefix} {
		if len(f) > 1 {
			return argErr("Found multiple arguments for an option that takes only one")
		}
	}
	if err := o.checkTopic(); err != nil {
		return err
	}
	if len(o.unsupported) > 0 {
		return argErr("%s is not supported: tollgate configs manages client quotas (users, clients, ips, client-id-prefixes) and broker configs (brokers)", o.unsupported[0])
	}
	if actions := min(o.describe, 1) + min(o.alter, 1); actions != 1 {
		return &usageError{msg: "Command must include exactly one action: --describe, --alter", showUsage: true}
	}
	if o.describe > 0 {
		for _, c := range []struct {
			name string
			set  bool
		}{{"add-config", len(o.addConfig) > 0}, {"add-config-file", len(o.addConfigFile) > 0}, {"delete-config", o.hasDelete}} {
			if c.set {
				return &usageError{msg: fmt.Sprintf(`Option "[describe]" can't be used with option "[%s]"`, c.name), showUsage: true}
			}
		}
	}
	return nil
}

// distinctTypes returns the set of the entity types given, refusing any
// given twice.
func distinctTypes(types []string) (map[string]bool, error) {
	var dups []string
	seen := map[string]bool{}
	for _, t := range types {
		if seen[t] && !slices.Contains(dups, t) {
			dups = append(dups, t)
		}
		seen[t] = true
	}
	if len(dups) > 0 {
		return nil, argErr("Duplicate entity type(s) specified: %s", strings.Join(dups, ","))
	}
	return seen, nil
}

// checkTypes checks the entity types: ones Tollgate manages, in a
// combination kafka-configs accepts, and named one way only.
func (o *configsOpts) checkTypes(types []string, seen map[string]bool) error {
	for _, t := range types {
		if slices.Contains(kafkaOnlyTypes, t) {
			return argErr("Entity type %s is not supported: tollgate configs manages client quotas (users, clients, ips, client-id-prefixes) and broker configs (brokers); use kafka-configs.sh for %s", t, t)
		}
		if t != usersType && t != clientsType && t != ipsType && t != brokersType && t != clientPrefixesType {
			return argErr("Invalid entity type %s, the entity type must be one of users, clients, brokers, ips, client-id-prefixes with a --bootstrap-server argument", t)
		}
	}
	if len(types) == 0 && !o.perTopic() {
		return argErr("At least one entity type must be specified")
	}
	if len(types) > 1 && !(len(types) == 2 && seen[usersType] && seen[clientsType]) {
		return argErr("Only 'users' and 'clients' entity types may be specified together")
	}
	if (o.hasEntityName || len(o.typeFlags) > 0 || o.hasEntityDefault) && o.hasShorthand() {
		return argErr("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
	}
	return nil
}

// checkNames checks the entity names against their types: broker ids,
// no default client-id prefix, IP addresses or hosts.
func checkNames(types []string, seen map[string]bool, names []string) error {
	if seen[brokersType] {
		if _, err := brokerIDs(names); err != nil {
			return err
		}
	}
	if seen[clientPrefixesType] && slices.Contains(names, "") {
		return argErr("client-id-prefixes have no default entity: give the prefix with --entity-name (a default client-id quota is --entity-type clients --entity-default)")
	}
	if seen[ipsType] {
		for _, n := range names {
			if n != "" && !validIPEntity(n) {
				return argErr("The entity name for %s must be a valid IP or resolvable host, but it is: %s", types[0], n)
			}
		}
	}
	return nil
}

// checkAlter checks what --alter needs: an entity for each type (alone,
// --entity-type ips is the default ip) and one source of changes.
func (o *configsOpts) checkAlter(types, names []string) error {
	hasName := slices.ContainsFunc(names, func(n string) bool { return n != "" })
	hasDefault := slices.Contains(names, "")
	if !hasName && !hasDefault && len(types) > 0 {
		if len(types) == 1 && types[0] == ipsType {
			// KIP-612: "--entity-type ips" alone alters the default ip.
			o.specNames = append(o.specNames, "")
		} else {
			return argErr("An entity-name or default entity must be specified with --alter of users, clients, brokers, ips or client-id-prefixes")
		}
	}
	if len(o.addConfig) > 0 && len(o.addConfigFile) > 0 {
		return argErr("Only one of --add-config or --add-config-file must be specified")
	}
	if len(o.addConfig) == 0 && len(o.addConfigFile) == 0 && !o.hasDelete {
		return argErr("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
	}
	if n := len(o.entityNames()); n > len(types) {
		return argErr(moreNames)
	} else if n < len(types) {
		return argErr("An entity name must be specified for every entity type")
	}
	return nil
}

// moreNames is kafka-configs' message for more names than types (which
// --entity-name and --entity-default given for the same type lead to),
// with a hint.
const moreNames = "More entity names specified than entity types (give one --entity-name or --entity-default per --entity-type, in the same order)"

// validIPEntity accepts what kafka-configs accepts (an address or a
// resolvable host) and the CIDR ranges Tollgate supports.
func validIPEntity(n string) bool {
	if _, err := netip.ParseAddr(n); err == nil {
		return true
	}
	if _, err := admission.ParseIPEntity(n); err == nil {
		return true
	}
	addrs, err := net.LookupHost(n)
	return err == nil && len(addrs) > 0
}

// runConfigs is `tollgate configs`.
func runConfigs(ctx context.Context, env *Env, args []string) int {
	o, err, done := parseConfigsArgs(args, env.Stdout)
	if done {
		return 0
	}
	if err != nil {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
			msg = strings.TrimPrefix(name, "-") + " is not a recognized option"
		}
		fmt.Fprintln(env.Stderr, msg)
		fmt.Fprintln(env.Stderr, configsHint)
		return 1
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(env.Stderr, err)
		if ue, ok := err.(*usageError); ok && ue.showUsage {
			fmt.Fprintln(env.Stderr, configsHint)
		}
		return 1
	}
	cc, err := loadClientConfig(o.bootstrap[0], o.commandConfig)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	cl, watch, err := newClient(cc)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	if o.alter > 0 {
		err = alterConfig(ctx, env, cl, o)
	} else {
		err = describeConfig(ctx, env, cl, o)
	}
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		// IllegalArgumentException and InvalidConfigurationException:
		// kafka-configs prints the message alone.
		fmt.Fprintln(env.Stderr, ue.msg)
		return 1
	}
	fmt.Fprintf(env.Stderr, "Error while executing config command with args '%s'\n", strings.Join(o.args, " "))
	var se *serverError
	if errors.As(err, &se) {
		fmt.Fprintf(env.Stderr, "%s: %s\n", se.javaName(), se.Error())
	} else {
		fmt.Fprintln(env.Stderr, clientErr(err, watch, env.timeout()))
	}
	return 1
}

// clientErr phrases a client-side failure (no connection, authentication,
// timeout).
func clientErr(err error, w *connWatch, timeout time.Duration) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return javaException(ke.Message) + ": " + err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("TimeoutException: no answer from the cluster within %v", timeout)
		if p := w.lastProblem(); p != "" {
			msg += "; last problem: " + p
		}
		return msg
	}
	return err.Error()
}

func loadClientConfig(bootstrap, commandConfig string) (*clientConfig, error) {
	var props map[string]string
	if commandConfig != "" {
		var err error
		if props, err = loadProps(commandConfig); err != nil {
			return nil, fmt.Errorf("--command-config: %w", err)
		}
	}
	cc, err := newClientConfig(bootstrap, props)
	if err != nil && commandConfig != "" {
		return nil, fmt.Errorf("%s: %w", commandConfig, err)
	}
	return cc, err
}

// filterComponent is one ClientQuotaFilterComponent.
type filterComponent struct {
	typ   string
	name  *part // nil: any entity of the type (MATCH_TYPE_SPECIFIED)
	exact part
}

func wireType(t string) string {
	switch t {
	case usersType:
		return model.TypeUser
	case clientsType:
		return model.TypeClientID
	case clientPrefixesType:
		return model.TypeClientIDPrefix
	}
	return model.TypeIP
}

// quotaFilter is getAllClientQuotasConfigs' filter: types zipped with names.
func quotaFilter(types, names []string) ([]filterComponent, error) {
	if len(names) > len(types) {
		return nil, argErr("More entity names specified than entity types")
	}
	var out []filterComponent
	for i, t := range types {
		c := filterComponent{typ: wireType(t)}
		if i < len(names) {
			p := configsPart(names[i])
			c.name = &p
		}
		out = append(out, c)
	}
	return out, nil
}

// matchesStrict is the broker's match of a ClientQuotaFilter.containsOnly
// (strict) filter: the entity has exactly the filter's types, each exact or
// default component matches, and a type-only component matches any name or
// the default (as Kafka's ClientQuotasImage does).
func matchesStrict(e entity, filter []filterComponent) bool {
	if len(e.components()) != len(filter) {
		return false
	}
	for _, f := range filter {
		p, ok := e.partOf(f.typ)
		if !ok {
			p = &e.ip
		}
		if !p.set {
			return false
		}
		if f.name != nil && (p.dflt != f.name.dflt || p.name != f.name.name) {
			return false
		}
	}
	return true
}

// describeQuotas returns the entities matching the filter, in the order
// kafka-configs prints them (the iteration order of the Java client's
// HashMap), each with its values in the same order.
func describeQuotas(ctx context.Context, cl *kgo.Client, filter []filterComponent) ([]described, error) {
	all, err := describeAll(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []described
	for _, d := range all {
		if matchesStrict(d.entity, filter) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b described) int { return compareEntities(a.entity, b.entity) })
	hashes := make([]int32, len(out))
	for i, d := range out {
		for _, c := range d.entity.components() {
			hashes[i] += javaStringHash(c.typ) ^ javaNullableHash(c.p.wire())
		}
	}
	ordered := make([]described, 0, len(out))
	for _, i := range javaHashMapOrder(hashes) {
		ordered = append(ordered, out[i])
	}
	return ordered, nil
}

// javaKeyOrder orders quota keys as the Java client's HashMap iterates them.
func javaKeyOrder(values map[string]float64) []string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := keyRank(a) - keyRank(b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	hashes := make([]int32, len(keys))
	for i, k := range keys {
		hashes[i] = javaStringHash(k)
	}
	out := make([]string, 0, len(keys))
	for _, i := range javaHashMapOrder(hashes) {
		out = append(out, keys[i])
	}
	return out
}

// kafkaEntityString is describeQuotaConfigs' entity text:
// "user-principal 'alice', client-id 'app'", "the default ip".
func kafkaEntityString(e entity) string {
	var parts []string
	for _, c := range e.components() {
		typ := map[string]string{model.TypeUser: "user-principal", model.TypeClientID: "client-id", model.TypeIP: "ip", model.TypeClientIDPrefix: "client-id-prefix",
			model.TypeTopic: "topic", model.TypeTopicPrefix: "topic-prefix"}[c.typ]
		if c.p.dflt || c.p.name == "" {
			parts = append(parts, "the default "+typ)
		} else {
			parts = append(parts, typ+" '"+c.p.name+"'")
		}
	}
	return strings.Join(parts, ", ")
}

func describeConfig(ctx context.Context, env *Env, cl *kgo.Client, o *configsOpts) error {
	types, names := o.entityTypes(), o.entityNames()
	if len(types) > 0 && types[0] == brokersType {
		return describeBrokers(ctx, env, cl, o)
	}
	filter, err := quotaFilter(types, names)
	if err != nil {
		return err
	}
	if o.perTopic() {
		typ, name := o.topicPart()
		p := named(name)
		filter = append(filter, filterComponent{typ: typ, name: &p})
	}
	ds, err := describeQuotas(ctx, cl, filter)
	if err != nil {
		return err
	}
	for _, d := range ds {
		var vals []string
		for _, k := range javaKeyOrder(d.values) {
			vals = append(vals, k+"="+javaDouble(d.values[k]))
		}
		fmt.Fprintf(env.Stdout, "Quota configs for %s are %s\n", kafkaEntityString(d.entity), strings.Join(vals, ", "))
	}
	// As kafka-configs: SCRAM credentials are described for users, unless
	// client-ids or a default are involved.
	if o.perTopic() || types[0] == ipsType || types[0] == clientPrefixesType || slices.Contains(types, clientsType) || slices.Contains(names, "") {
		return nil
	}
	return describeSCRAM(ctx, env, cl, names)
}

func describeSCRAM(ctx context.Context, env *Env, cl *kgo.Client, users []string) error {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return &serverError{err: err, msg: deref(resp.ErrorMessage)}
	}
	results := slices.Clone(resp.Results)
	if len(users) == 0 {
		slices.SortFunc(results, func(a, b kmsg.DescribeUserSCRAMCredentialsResponseResult) int {
			return strings.Compare(a.User, b.User)
		})
	}
	for _, r := range results {
		if r.ErrorCode == kerr.ResourceNotFound.Code {
			continue // a user without credentials is not listed
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			se := &serverError{err: err, msg: deref(r.ErrorMessage)}
			fmt.Fprintf(env.Stdout, "Error retrieving SCRAM credential configs for user-principal '%s': %s: %s\n", r.User, se.javaName(), se.Error())
			continue
		}
		var infos []string
		for _, ci := range r.CredentialInfos {
			mech := "UNKNOWN"
			switch ci.Mechanism {
			case 1:
				mech = "SCRAM-SHA-256"
			case 2:
				mech = "SCRAM-SHA-512"
			}
			infos = append(infos, mech+"=iterations="+strconv.Itoa(int(ci.Iterations)))
		}
		fmt.Fprintf(env.Stdout, "SCRAM credential configs for user-principal '%s' are %s\n", r.User, strings.Join(infos, ", "))
	}
	return nil
}

// configKeyChars is kafka-configs' validatePropsKey.
var configKeyChars = regexp.MustCompile(`^[$a-zA-Z0-9._-]*$`)

// splitOutsideBrackets splits s on sep where sep is not inside [...]
// (kafka-configs' lookahead (?=[^\]]*(?:\[|$))), keeping empty fields.
func splitOutsideBrackets(s string, isSep func(s string, i int) int) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		if n := isSep(s, i); n > 0 && !insideBrackets(s[i+n:]) {
			out = append(out, s[start:i])
			i += n
			start = i
			continue
		}
		i++
	}
	return append(out, s[start:])
}

// insideBrackets reports whether the text after a separator closes a bracket
// before opening one, i.e. the separator is inside [...].
func insideBrackets(rest string) bool {
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case ']':
			return true
		case '[':
			return false
		}
	}
	return false
}

// parseAddConfig is parseConfigsToBeAdded for --add-config.
func parseAddConfig(s string) (map[string]string, []string, error) {
	props := map[string]string{}
	var order []string
	pairs := splitOutsideBrackets(s, func(s string, i int) int {
		if s[i] == ',' {
			return 1
		}
		return 0
	})
	for _, p := range pairs {
		kv := splitOutsideBrackets(p, func(s string, i int) int {
			// \s*=\s*
			j := i
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j < len(s) && s[j] == '=' {
				j++
				for j < len(s) && isSpace(s[j]) {
					j++
				}
				return j - i
			}
			return 0
		})
		if len(kv) != 2 {
			return nil, nil, argErr(`Invalid entity config: all configs to be added must be in the format "key=val" or  "key=[val1,val2]" to group values which contain commas.`)
		}
		k := strings.TrimSpace(kv[0])
		v := strings.TrimSpace(strings.NewReplacer("[", "", "]", "").Replace(kv[1]))
		if _, dup := props[k]; !dup {
			order = append(order, k)
		}
		props[k] = v
	}
	return props, order, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// parseQuotaValue is Double.parseDouble as kafka-configs applies it.
func parseQuotaValue(k, v string) (float64, error) {
	s := strings.TrimSpace(v)
	if n := len(s); n > 1 && strings.ContainsRune("dDfF", rune(s[n-1])) && !strings.HasSuffix(strings.ToLower(s), "inf") {
		s = s[:n-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || strings.EqualFold(s, "inf") || strings.EqualFold(s, "+inf") || strings.EqualFold(s, "-inf") {
		return 0, argErr("Cannot parse quota configuration value for %s: %s", k, v)
	}
	return f, nil
}

func alterConfig(ctx context.Context, env *Env, cl *kgo.Client, o *configsOpts) error {
	types, names := o.entityTypes(), o.entityNames()
	var entityType string
	if len(types) > 0 {
		entityType = types[0]
	}
	add, addOrder, err := o.configsToAdd()
	if err != nil {
		return err
	}
	if entityType == brokersType {
		return alterBrokers(ctx, env, cl, o, add, addOrder)
	}
	del := o.deleteConfig
	unknownAdd, unknownDel := unknownKeys(entityType, addOrder), unknownKeys(entityType, del)
	if o.perTopic() {
		// A per-topic quota takes the byte rates and the options; the
		// server says so for the other quota keys, with Kafka's message.
		if unknown := sortedUnion(unknownAdd, unknownDel); len(unknown) > 0 {
			return argErr("Only quota configs can be set for a per-topic quota (producer_byte_rate, consumer_byte_rate, shadow, burst_seconds). Unexpected config names: %s", strings.Join(unknown, ","))
		}
		return alterQuotaConfigs(ctx, env, cl, o, types, names, add, addOrder, del)
	}
	switch {
	case entityType == ipsType:
		if all := sortedUnion(unknownAdd, unknownDel); len(all) > 0 {
			return argErr("Only connection quota configs can be added for 'ips' using --bootstrap-server. Unexpected config names: %s", strings.Join(all, ", "))
		}
	case entityType == clientsType || entityType == clientPrefixesType || len(types) == 2:
		what := "clients"
		if entityType == clientPrefixesType {
			what = clientPrefixesType
		}
		if err := checkQuotaKeys(what, "Only quota configs", unknownAdd, unknownDel); err != nil {
			return err
		}
	default: // users
		if err := checkQuotaKeys("users", "Only quota and SCRAM credential configs", notSCRAM(unknownAdd), notSCRAM(unknownDel)); err != nil {
			return err
		}
		scramAdd, scramDel := scramKeys(addOrder), scramKeys(del)
		if len(scramAdd) > 0 || len(scramDel) > 0 {
			if slices.Contains(names, "") {
				return argErr("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server.")
			}
			if len(scramAdd) < len(addOrder) || len(scramDel) < len(del) {
				return argErr("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.")
			}
			if err := alterSCRAM(ctx, cl, names[0], add, scramAdd, scramDel); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Completed updating config for user %s.\n", names[0])
			return nil
		}
	}
	return alterQuotaConfigs(ctx, env, cl, o, types, names, add, addOrder, del)
}

// configsToAdd reads the configs --add-config-file and --add-config give,
// each file's keys sorted (a properties file has no order), --add-config's
// in the order written and replacing the files'.
func (o *configsOpts) configsToAdd() (add map[string]string, order []string, err error) {
	add = map[string]string{}
	for _, f := range o.addConfigFile {
		props, err := loadProps(f)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			add[k] = props[k]
			order = append(order, k)
		}
	}
	if len(o.addConfig) > 0 {
		if add, order, err = parseAddConfig(o.addConfig[0]); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range order {
		if !configKeyChars.MatchString(k) {
			return nil, nil, argErr("Invalid character found for config key: %s", k)
		}
	}
	return add, order, nil
}

// unknownKeys returns, sorted, the keys that are no config of entityType.
func unknownKeys(entityType string, keys []string) []string {
	var out []string
	for _, k := range keys {
		if !validKeyFor(entityType, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sortedUnion returns the keys of a and b, sorted, each once.
func sortedUnion(a, b []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
}

// checkQuotaKeys refuses the unknown keys of an alteration of what:
// "<only> can be added (or deleted) for 'what'".
func checkQuotaKeys(what, only string, unknownAdd, unknownDel []string) error {
	if len(unknownAdd) > 0 {
		return argErr("%s can be added for '%s' using --bootstrap-server. Unexpected config names: %s", only, what, strings.Join(unknownAdd, ","))
	}
	if len(unknownDel) > 0 {
		return argErr("%s can be deleted for '%s' using --bootstrap-server. Unexpected config names: %s", only, what, strings.Join(unknownDel, ","))
	}
	return nil
}

// notSCRAM returns keys without the SCRAM mechanisms.
func notSCRAM(keys []string) []string { return slices.DeleteFunc(slices.Clone(keys), isSCRAMKey) }

// scramKeys returns the SCRAM mechanisms among keys.
func scramKeys(keys []string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !isSCRAMKey(k) })
}

func validKeyFor(entityType, k string) bool {
	if entityType == ipsType {
		return k == model.KeyConnectionCreationRate
	}
	return isClientQuotaKey(k) || isOptionKey(k)
}

func isSCRAMKey(k string) bool { return k == "SCRAM-SHA-256" || k == "SCRAM-SHA-512" }

// Kafka's SCRAM defaults: kafka-configs salts with 4096 iterations unless
// told otherwise, and both mechanisms require at least 4096.
const (
	defaultSCRAMIterations = 4096
	minSCRAMIterations     = 4096
)

// scramCredential is kafka-configs' credential syntax:
// [iterations=N,]password=P (the brackets already removed).
var scramCredential = regexp.MustCompile(`^(?:iterations=(-?[0-9]*),)?password=(.*)$`)

// alterSCRAM upserts and deletes one user's SCRAM credentials, as
// kafka-configs does with AlterUserScramCredentials: the password is
// salted here (kadm draws the salt), never sent.
func alterSCRAM(ctx context.Context, cl *kgo.Client, user string, add map[string]string, addKeys, del []string) error {
	mech := func(k string) kadm.ScramMechanism {
		if k == "SCRAM-SHA-512" {
			return kadm.ScramSha512
		}
		return kadm.ScramSha256
	}
	var ups []kadm.UpsertSCRAM
	for _, k := range addKeys {
		m := scramCredential.FindStringSubmatch(add[k])
		if m == nil {
			return argErr("Invalid credential property %s=%s", strings.ReplaceAll(k, "-", "_"), add[k])
		}
		iterations := defaultSCRAMIterations
		if m[1] != "" && m[1] != "-1" {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return argErr("Invalid credential property %s=%s", strings.ReplaceAll(k, "-", "_"), add[k])
			}
			iterations = n
		}
		if iterations < minSCRAMIterations {
			return argErr("Iterations %d is less than the minimum %d required for %s", iterations, minSCRAMIterations, k)
		}
		ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: mech(k), Iterations: int32(iterations), Password: m[2]})
	}
	var dels []kadm.DeleteSCRAM
	for _, k := range del {
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: mech(k)})
	}
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return err
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return &serverError{err: r.Err, msg: r.ErrMessage}
		}
	}
	return nil
}
