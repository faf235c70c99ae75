package kafka

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// State is what a running cluster writes to Dir/cluster.json, so that
// another process (a test binary during development, the user's shell)
// can use it: its version, its nodes' addresses and its CA.
type State struct {
	Version   string      `json:"version"`
	ClusterID string      `json:"cluster_id"`
	CAFile    string      `json:"ca_file"`
	Classpath string      `json:"classpath"`
	Nodes     []NodeState `json:"nodes"`
}

// NodeState is one node in State.
type NodeState struct {
	ID            int32  `json:"id"`
	Plaintext     string `json:"plaintext"`
	SASLPlaintext string `json:"sasl_plaintext"`
	SSL           string `json:"ssl"`
}

// WriteState writes the cluster's State to Dir/cluster.json and returns
// the path.
func (c *Cluster) WriteState() (string, error) {
	st := State{Version: c.Version, ClusterID: c.ClusterID, CAFile: c.CA.CertFile, Classpath: c.Classpath}
	for _, n := range c.Nodes() {
		st.Nodes = append(st.Nodes, NodeState{ID: n.ID, Plaintext: n.Plaintext, SASLPlaintext: n.SASL, SSL: n.SSL})
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.Dir, "cluster.json")
	return p, os.WriteFile(p, append(b, '\n'), 0o644)
}

// Attach uses a cluster another process runs (its cluster.json): the
// addresses, the CA and the tools work; Kill, Restart, Pause and Stop do
// not touch it (they need a cluster of this process's own).
func Attach(stateFile string) (*Cluster, error) {
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile, err)
	}
	if len(st.Nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes", stateFile)
	}
	java, err := javaBin()
	if err != nil {
		return nil, err
	}
	ca, err := loadCA(st.CAFile)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Version: st.Version, ClusterID: st.ClusterID, Dir: filepath.Dir(stateFile), CA: ca,
		Classpath: st.Classpath, java: java, attached: true}
	for _, n := range st.Nodes {
		c.nodes = append(c.nodes, &Node{ID: n.ID, Plaintext: n.Plaintext, SASL: n.SASLPlaintext, SSL: n.SSL})
	}
	return c, nil
}

var errAttached = errors.New("kafka: an attached cluster (TOLLGATE_KAFKA_CLUSTER) belongs to another process; a test that stops brokers needs its own")

// loadCA reads an attached cluster's CA certificate (it can verify, not
// issue).
func loadCA(file string) (*testpki.CA, error) {
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM certificate", file)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	ca := &testpki.CA{Cert: cert, CertPEM: pemBytes, CertFile: file, Pool: x509.NewCertPool(), Dir: filepath.Dir(file)}
	ca.Pool.AddCert(cert)
	return ca, nil
}

// TollgateConfig is a Tollgate config file (YAML) that fronts the cluster's
// PLAINTEXT listener with one listener on 127.0.0.1:9092, with comments
// saying how to use its SSL and SASL_PLAINTEXT listeners instead
// (scripts/kafka-dev.sh prints it).
func (c *Cluster) TollgateConfig() string {
	return fmt.Sprintf(`# Apache Kafka %s: 3 KRaft nodes on 127.0.0.1. Its data and logs: %s
#
# Tollgate in front of it:
#   go run ./cmd/tollgate serve --config tollgate.yaml
listeners:
  - name: PLAINTEXT
    bootstrap: 127.0.0.1:9092
upstream:
  bootstrap: [%s]
#
# Or its SSL listener (the cluster's own CA):
#   upstream: {bootstrap: [%s], tls: {ca_file: %s}}
# Or its SASL_PLAINTEXT listener (users admin, alice, bob, passwords <user>-secret;
# PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER with Kafka's unsecured validator):
#   upstream: {bootstrap: [%s], sasl: {mechanism: SCRAM-SHA-512, username: admin, password: admin-secret}}
`, c.Version, c.Dir, strings.Join(c.Bootstrap(Plaintext), ", "),
		strings.Join(c.Bootstrap(SSL), ", "), c.CA.CertFile, strings.Join(c.Bootstrap(SASL), ", "))
}
