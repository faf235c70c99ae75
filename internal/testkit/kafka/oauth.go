package kafka

import (
	"encoding/base64"
	"fmt"
	"time"
)

// unsecuredToken is an unsigned JWT ("alg":"none") for sub, what Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler accepts: iat and exp set,
// no signature.
func unsecuredToken(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+3600)) + "."
}

// UnsecuredToken is the OAUTHBEARER token a test's client presents as sub
// to the cluster's unsecured validator.
func UnsecuredToken(sub string) string { return unsecuredToken(sub) }
