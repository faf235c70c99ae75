package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// brokerQuotas: the brokers enforce no client quotas of their own. Kafka
// enforces a quota on each broker; Tollgate enforces it for the whole
// cluster in front of them. A client under both is throttled twice — by
// Tollgate for the cluster, and by each broker again for its share — and
// the two throttles add up. The check asks the upstream for every quota
// entity (DescribeClientQuotas, match-all, through upstream.tls /
// upstream.sasl) and warns when there is any.
func (r *runner) brokerQuotas(ctx context.Context) Result {
	res := Result{Check: "broker quotas"}
	cl, qctx, done, ok := r.brokerClient(ctx, &res, "embedded cluster: its brokers enforce no quotas")
	if !ok {
		return res
	}
	defer done()
	quotas, err := kadm.NewClient(cl).DescribeClientQuotas(qctx, false, nil)
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		res.Status = Warn
		res.Detail = "not checked: Tollgate's upstream identity may not describe the brokers' client quotas"
		res.Fix = "grant it DescribeConfigs on the cluster to let the doctor see them, or check with kafka-configs --describe --entity-type users/clients/ips"
		return res
	case err != nil:
		res.Status, res.Detail = Warn, "not checked: "+err.Error()
		return res
	case len(quotas) == 0:
		res.Detail = "the brokers enforce no client quotas of their own"
		return res
	}
	shown := make([]string, 0, 3)
	for _, q := range quotas[:min(len(quotas), 3)] {
		shown = append(shown, describeQuota(q))
	}
	more := ""
	if len(quotas) > 3 {
		more = fmt.Sprintf(" and %d more", len(quotas)-3)
	}
	res.Status = Warn
	res.Detail = fmt.Sprintf("the brokers enforce %d client quota entities of their own (%s%s): a client under one is throttled twice, by each broker and by Tollgate", len(quotas), strings.Join(shown, "; "), more)
	res.Fix = "keep the quotas in one place: import them into Tollgate (tollgate quotas import --from <broker> -o quotas.yaml, then tollgate quotas apply -f quotas.yaml) and remove them from the brokers (kafka-configs --bootstrap-server <broker> --alter --delete-config ... --entity-type users/clients/ips)"
	return res
}

// describeQuota renders one entity's quotas as kafka-configs names them.
func describeQuota(q kadm.DescribedClientQuota) string {
	var ent, vals []string
	for _, c := range q.Entity {
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		ent = append(ent, c.Type+"="+name)
	}
	for _, v := range q.Values {
		vals = append(vals, fmt.Sprintf("%s=%g", v.Key, v.Value))
	}
	return strings.Join(ent, ",") + " " + strings.Join(vals, ",")
}
