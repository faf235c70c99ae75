package control

import (
	"strconv"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes used by the control plane, from kerr.
var (
	errNone                       int16 = 0
	errUnknownServerError               = kerr.UnknownServerError.Code
	errClusterAuthorizationFailed       = kerr.ClusterAuthorizationFailed.Code
	errUnsupportedVersion               = kerr.UnsupportedVersion.Code
	errInvalidRequest                   = kerr.InvalidRequest.Code
	errInvalidConfig                    = kerr.InvalidConfig.Code
)

// msgClusterAuthorizationFailed is Errors.CLUSTER_AUTHORIZATION_FAILED's
// default message, what Kafka answers a denied request with.
const msgClusterAuthorizationFailed = "Cluster authorization failed."

// The option keys, the quota model's (model.KeyShadow,
// model.KeyBurstSeconds): shadow marks every quota of its entity shadow,
// measured and shown, not enforced (only value 1; removing it is the switch
// to enforced, one audited AlterClientQuotas entry); burst_seconds is the
// start-up burst of its entity's token buckets in seconds of quota.
const (
	KeyShadow       = model.KeyShadow
	KeyBurstSeconds = model.KeyBurstSeconds
)

// keyConnectionCreationRate is the ip entity's only key.
const keyConnectionCreationRate = model.KeyConnectionCreationRate

// apiError is a Kafka error code and message; code 0 is success.
type apiError struct {
	code int16
	msg  string
}

func (e apiError) failed() bool { return e.code != errNone }

func invalid(msg string) apiError { return apiError{code: errInvalidRequest, msg: msg} }

// parts is the entity as the quota model checks it, in the map's
// iteration order (which decides the message when there are several
// problems).
func (e javaEntity) parts() []model.Part {
	out := make([]model.Part, len(e.pairs))
	for i, p := range e.pairs {
		out[i] = model.Part{Type: p.typ, Name: p.name}
	}
	return out
}

// validateEntity is ClientQuotaControlManager.validateEntity
// (model.CheckParts).
func validateEntity(e javaEntity) apiError {
	if err := model.CheckParts(e.parts()); err != nil {
		return invalid(err.Error())
	}
	return apiError{}
}

// keysForEntity is configKeysForEntityType (model.KeysFor): the keys the
// entity may carry.
func keysForEntity(e javaEntity) (model.KeySet, apiError) {
	keys, err := model.KeysFor(e.parts())
	if err != nil {
		return nil, invalid(err.Error())
	}
	return keys, apiError{}
}

// validateKeyValue is validateQuotaKeyValue for a set (model.CheckValue;
// removals are not validated).
func validateKeyValue(keys model.KeySet, key string, v float64) apiError {
	if err := model.CheckValue(keys, key, v); err != nil {
		return invalid(err.Error())
	}
	return apiError{}
}

// matchTypeString renders a match type as Java prints a byte.
func matchTypeString(m int8) string { return strconv.Itoa(int(m)) }
