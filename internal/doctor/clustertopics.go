package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterTopics names a Tollgate cluster's topics for the "cluster topics"
// check.
type ClusterTopics struct {
	Config, Exchange string
	// Signed: cluster.secret_file is set.
	Signed bool
	// Principal is Tollgate's own identity on the upstream as the brokers'
	// authorizer names it ("User:svc" for upstream.sasl's user); "" when
	// the doctor cannot tell (mTLS, OAUTHBEARER, no SASL).
	Principal string
}

// clusterTopics: only Tollgate may write its cluster's topics. The
// signatures (cluster.secret_file) keep a forged record from being
// applied, but whoever may write a compacted topic can still shadow a
// genuine record until compaction removes it, and fill the exchange
// topic; the brokers' ACLs must keep everyone else off. The check asks the
// brokers which ACLs allow writing each topic (DescribeAcls, the MATCH
// pattern: literal, prefixed and wildcard bindings that cover the name)
// and warns for every principal other than Tollgate's, for a broker with
// no authorizer, for allow.everyone.if.no.acl.found=true, and when the
// records are not signed.
func (r *runner) clusterTopics(ctx context.Context) Result {
	ct := r.t.Cluster
	res := Result{Check: "cluster topics"}
	unsigned := ""
	if !ct.Signed {
		unsigned = "; and cluster.secret_file is not set: what anyone writes to them is trusted"
	}
	cl, qctx, done, ok := r.brokerClient(ctx, &res, "embedded cluster: no one else reaches it")
	if !ok {
		return res
	}
	defer done()
	fix := "grant Write on " + ct.Config + " and " + ct.Exchange + " to Tollgate's principal only (kafka-acls --list --topic <topic>; kafka-acls --remove ...), and set cluster.secret_file on every instance"
	var others []string
	named := true // every topic is covered by some binding
	for _, topic := range []string{ct.Config, ct.Exchange} {
		ws, covered, err := writersOf(qctx, cl, topic, ct.Principal)
		named = named && covered
		switch {
		case errors.Is(err, kerr.SecurityDisabled):
			res.Status, res.Fix = Warn, "enable an authorizer on the brokers (authorizer.class.name) and "+fix
			res.Detail = "the brokers have no authorizer: every client that reaches them may write " + ct.Config + " and " + ct.Exchange + unsigned
			return res
		case errors.Is(err, kerr.ClusterAuthorizationFailed):
			res.Status = Warn
			res.Detail = "not checked: Tollgate's upstream identity may not describe the brokers' ACLs" + unsigned
			res.Fix = "grant it Describe on the cluster to let the doctor see them, or check with kafka-acls --list --topic " + ct.Config
			return res
		case err != nil:
			res.Status, res.Detail = Warn, "not checked: "+err.Error()
			return res
		}
		for _, w := range ws {
			if !slices.Contains(others, w) {
				others = append(others, w)
			}
		}
	}
	if len(others) > 0 && ct.Principal == "" {
		res.Status, res.Fix = Warn, fix
		res.Detail = "these principals may write the Tollgate cluster's topics; the doctor cannot tell which one is Tollgate's (mTLS or OAUTHBEARER upstream): " + strings.Join(others, ", ") + unsigned
		return res
	}
	if len(others) > 0 {
		res.Status, res.Fix = Warn, fix
		res.Detail = "principals other than Tollgate's (" + ct.Principal + ") may write the Tollgate cluster's topics: " + strings.Join(others, ", ") + unsigned
		return res
	}
	if !named && r.allowEveryone(qctx, cl) {
		res.Status, res.Fix = Warn, "set allow.everyone.if.no.acl.found=false on the brokers and "+fix
		res.Detail = "the brokers allow everyone where no ACL is found (allow.everyone.if.no.acl.found=true), and no ACL names these topics" + unsigned
		return res
	}
	caveat := ""
	if !named {
		// Brokers do not show the authorizer's own settings.
		caveat = "; no ACL names them, so only super.users may write them — unless the brokers set allow.everyone.if.no.acl.found=true, which they do not show"
	}
	if !ct.Signed {
		res.Status, res.Fix = Warn, "write a secret of at least 32 bytes to a file, set cluster.secret_file to it on every instance (docs/cluster.md#signing)"
		res.Detail = "no ACL lets another principal write the topics, but cluster.secret_file is not set: the records and reports are not signed" + caveat
		return res
	}
	res.Detail = "no ACL lets a principal other than Tollgate's write " + ct.Config + " or " + ct.Exchange + ", and their records are signed (keep tenants out of super.users, which the brokers do not show)" + caveat
	return res
}

// writersOf lists the principals other than own that an ALLOW binding
// lets write topic (Write or All; literal, prefixed or wildcard). Every
// topic binding is asked for and matched here, as Kafka's authorizer
// matches them (the MATCH filter does the same on a broker, not on kfake).
func writersOf(ctx context.Context, cl *kgo.Client, topic, own string) (writers []string, covered bool, err error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAllow
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, false, err
	}
	for _, rs := range resp.Resources {
		switch rs.ResourcePatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			if rs.ResourceName != topic && rs.ResourceName != "*" {
				continue
			}
		case kmsg.ACLResourcePatternTypePrefixed:
			if !strings.HasPrefix(topic, rs.ResourceName) {
				continue
			}
		default:
			continue
		}
		covered = covered || len(rs.ACLs) > 0
		for _, a := range rs.ACLs {
			if a.Operation != kmsg.ACLOperationWrite && a.Operation != kmsg.ACLOperationAll {
				continue
			}
			if own != "" && a.Principal == own {
				continue
			}
			writers = append(writers, fmt.Sprintf("%s on %s (%s %s)", a.Principal, topic, strings.ToLower(rs.ResourcePatternType.String()), rs.ResourceName))
		}
	}
	return writers, covered, nil
}

// allowEveryone reports whether a broker says
// allow.everyone.if.no.acl.found=true (false when it cannot be read).
func (r *runner) allowEveryone(ctx context.Context, cl *kgo.Client) bool {
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, r.brokers[0].ID)
	if err != nil {
		return false
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "allow.everyone.if.no.acl.found" && c.Value != nil && strings.EqualFold(*c.Value, "true") {
				return true
			}
		}
	}
	return false
}
