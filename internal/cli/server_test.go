package cli

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// validateLikeKafka makes the embedded cluster reject invalid quota values
// as Kafka's ClientQuotaControlManager does (kfake stores anything):
// INVALID_REQUEST with Kafka's message. It is meant for one-entity
// requests: a request with an invalid entry is not applied at all.
func validateLikeKafka(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.AlterClientQuotas), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.AlterClientQuotasRequest)
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		bad := false
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, c := range e.Entity {
				ce := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ce.Type, ce.Name = c.Type, c.Name
				re.Entity = append(re.Entity, ce)
			}
			if msg := kafkaQuotaError(e); msg != "" {
				bad = true
				re.ErrorCode = kerr.InvalidRequest.Code
				re.ErrorMessage = &msg
			}
			resp.Entries = append(resp.Entries, re)
		}
		if !bad {
			return nil, nil, false // kfake applies it
		}
		return resp, nil, true
	})
}

func kafkaQuotaError(e kmsg.AlterClientQuotasRequestEntry) string {
	for _, o := range e.Ops {
		if o.Remove {
			continue
		}
		integral := o.Key == "producer_byte_rate" || o.Key == "consumer_byte_rate"
		switch {
		case o.Value <= 0:
			return "Quota " + o.Key + " must be greater than 0"
		case integral && o.Value > math.MaxInt64:
			return "Proposed value for " + o.Key + " is too large for a LONG."
		case integral && math.Abs(math.Mod(o.Value, 1)) > 1e-6:
			return o.Key + " cannot be a fractional value."
		}
	}
	return ""
}

// certs is a CA and a certificate it signed, written as PEM files.
type certs struct {
	caFile, certFile, keyFile, bundleFile string
	serverTLS                             *tls.Config
}

// makeCerts creates a CA, a server certificate for hosts, and a client
// certificate, in dir (the bundle: the client's key and certificate in one
// file) and in the CA's directory.
func makeCerts(t *testing.T, dir string, hosts ...string) *certs {
	t.Helper()
	ca := testpki.NewCA(t, "tollgate test CA")
	srv := ca.Server(t, "broker", hosts...)
	cli := ca.Client(t, pkix.Name{CommonName: "client"})
	return &certs{
		caFile:     ca.CertFile,
		certFile:   cli.CertFile,
		keyFile:    cli.KeyFile,
		bundleFile: testpki.WriteFile(t, dir, "client-bundle.pem", append(cli.KeyPEM[:len(cli.KeyPEM):len(cli.KeyPEM)], cli.CertPEM...)),
		serverTLS:  ca.ServerConfig(srv),
	}
}
