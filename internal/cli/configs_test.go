package cli

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// seedAll is a cluster with quotas at every level.
var seedAll = map[string]map[string]float64{
	"user=alice":                         {"producer_byte_rate": 1024, "consumer_byte_rate": 2048},
	"user=bob":                           {"request_percentage": 12.5},
	"user=<default>":                     {"producer_byte_rate": 10485760},
	"client-id=app":                      {"consumer_byte_rate": 1048576},
	"client-id=<default>":                {"controller_mutation_rate": 5},
	"user=alice,client-id=app":           {"producer_byte_rate": 4096},
	"user=alice,client-id=<default>":     {"producer_byte_rate": 2000},
	"user=<default>,client-id=app":       {"consumer_byte_rate": 3000},
	"user=<default>,client-id=<default>": {"request_percentage": 200},
	"ip=10.0.0.1":                        {"connection_creation_rate": 20},
	"ip=<default>":                       {"connection_creation_rate": 100},
}

func TestConfigsDescribe(t *testing.T) {
	bothTargets(t, func(t *testing.T, tg *target) {
		tg.seed(t, seedAll)
		s := newSession(t, tg)
		b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP", "--describe"}
		run := func(args ...string) { s.run(append(b, args...)...) }

		s.note("one user, and a user without quotas (nothing printed)")
		run("--entity-type", "users", "--entity-name", "alice")
		run("--entity-type", "users", "--entity-name", "carol")
		s.note("every user-only entity, the default included (strict filter, as kafka-configs)")
		run("--entity-type", "users")
		s.note("the default user, both spellings")
		run("--entity-type", "users", "--entity-default")
		run("--user-defaults")
		s.note("client-ids")
		run("--entity-type", "clients", "--entity-name", "app")
		run("--entity-type", "clients")
		run("--client-defaults")
		s.note("(user, client-id)")
		run("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
		run("--user", "alice", "--client", "app")
		run("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients")
		run("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default")
		run("--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default")
		run("--entity-type", "users", "--entity-type", "clients")
		s.note("ips")
		run("--entity-type", "ips")
		run("--entity-type", "ips", "--entity-name", "10.0.0.1")
		run("--ip-defaults")
		s.golden("configs_describe")
	})
}

func TestConfigsAlter(t *testing.T) {
	bothTargets(t, func(t *testing.T, tg *target) {
		s := newSession(t, tg)
		b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP"}
		run := func(args ...string) { s.run(append(b, args...)...) }

		s.note("add, then change one key and add another")
		run("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576")
		run("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=2097152, consumer_byte_rate = 1024")
		run("--describe", "--entity-type", "users", "--entity-name", "alice")
		s.note("delete one key; deleting a key that is not set is refused")
		run("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate")
		run("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate,request_percentage")
		run("--describe", "--entity-type", "users", "--entity-name", "alice")
		s.note("add and delete in one command")
		run("--alter", "--user", "alice", "--add-config", "request_percentage=50", "--delete-config", "producer_byte_rate")
		run("--describe", "--user", "alice")
		s.note("defaults")
		run("--alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=5000000")
		run("--alter", "--client-defaults", "--add-config", "controller_mutation_rate=2.5")
		run("--alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=300")
		run("--describe", "--entity-type", "users", "--entity-type", "clients")
		run("--describe", "--entity-type", "clients")
		s.note("(user, client-id): kafka-configs names the first entity type in its message")
		run("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=4096")
		run("--alter", "--user", "alice", "--client", "app", "--add-config", "consumer_byte_rate=8192")
		run("--describe", "--user", "alice", "--client", "app")
		s.note("ips: --entity-type ips without a name alters the default (KIP-612)")
		run("--alter", "--entity-type", "ips", "--add-config", "connection_creation_rate=100")
		run("--alter", "--entity-type", "ips", "--entity-name", "10.0.0.7", "--add-config", "connection_creation_rate=5")
		run("--alter", "--ip", "192.168.0.0/16", "--add-config", "connection_creation_rate=50")
		run("--describe", "--entity-type", "ips")
		run("--alter", "--ip-defaults", "--delete-config", "connection_creation_rate")
		run("--describe", "--entity-type", "ips")
		s.note("--add-config-file")
		f := s.file("bob.properties", "consumer_byte_rate=4096\nproducer_byte_rate : 8192\n")
		run("--alter", "--user", "bob", "--add-config-file", f)
		run("--describe", "--user", "bob")
		s.note("values kafka-configs cannot parse, keys it does not know")
		run("--alter", "--user", "alice", "--add-config", "producer_byte_rate=fast")
		run("--alter", "--user", "alice", "--add-config", "producer_byte_rate")
		run("--alter", "--user", "alice", "--add-config", "producer_rate=10,foo=1")
		run("--alter", "--client", "app", "--delete-config", "foo")
		run("--alter", "--ip", "10.0.0.7", "--add-config", "producer_byte_rate=10")
		run("--alter", "--user", "alice", "--add-config", "bad key=1")
		s.note("SCRAM credentials, as kafka-configs alters them (AlterUserScramCredentials; salted here)")
		// One mechanism per command: a KRaft controller refuses two
		// changes of one user in one request (DUPLICATE_RESOURCE).
		run("--alter", "--user", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=c-secret]")
		run("--alter", "--user", "carol", "--add-config", "SCRAM-SHA-512=[password=c-secret]")
		run("--describe", "--user", "carol")
		run("--alter", "--user", "carol", "--delete-config", "SCRAM-SHA-512")
		run("--describe", "--user", "carol")
		run("--alter", "--user", "carol", "--add-config", "SCRAM-SHA-256=[iterations=1024,password=x]")
		run("--alter", "--user", "carol", "--add-config", "SCRAM-SHA-256=[secret]")
		run("--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]")
		run("--alter", "--user", "carol", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=10")
		run("--alter", "--client", "app", "--add-config", "SCRAM-SHA-256=[password=x]")
		s.golden("configs_alter")
	})
}

func TestConfigsInvalidCombinations(t *testing.T) {
	tg := startCluster(t)
	s := newSession(t, tg)
	b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP"}
	run := func(args ...string) {
		if code := s.run(append(b, args...)...); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
	}
	run("--entity-type", "users", "--entity-name", "alice")
	run("--describe", "--alter", "--entity-type", "users")
	run("--describe", "--entity-type", "users", "--add-config", "producer_byte_rate=1")
	run("--describe", "--entity-type", "users", "--delete-config", "producer_byte_rate")
	run("--alter", "--entity-type", "users", "--entity-name", "alice")
	run("--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1")
	run("--alter", "--entity-type", "clients", "--add-config", "producer_byte_rate=1")
	run("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-default", "--add-config", "producer_byte_rate=1")
	run("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-default")
	run("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--add-config", "producer_byte_rate=1")
	run("--describe", "--entity-type", "users", "--entity-type", "ips")
	run("--describe", "--entity-type", "ips", "--entity-type", "clients")
	run("--describe", "--entity-type", "users", "--entity-type", "users")
	run("--describe", "--entity-type", "topics", "--entity-name", "t")
	run("--describe", "--entity-type", "widgets")
	run("--describe")
	run("--describe", "--entity-type", "users", "--user", "alice")
	run("--describe", "--entity-type", "ips", "--entity-name", "not an ip")
	run("--alter", "--user", "alice", "--add-config", "producer_byte_rate=1", "--add-config-file", "x.properties")
	run("--describe", "--topic", "t")
	run("--describe", "--entity-type", "users", "stray")
	run("--describe", "--entity-type", "users", "--no-such-flag")
	if code := s.run("configs", "--describe", "--entity-type", "users"); code != 1 {
		t.Errorf("no --bootstrap-server: exit %d", code)
	}
	s.golden("configs_invalid")
}

// Validation errors of the server are printed with the server's message.
func TestConfigsServerValidation(t *testing.T) {
	tg := startCluster(t)
	validateLikeKafka(tg.cluster)
	s := newSession(t, tg)
	b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP", "--alter", "--user", "alice", "--add-config"}
	s.run(append(b, "producer_byte_rate=-1")...)
	s.run(append(b, "consumer_byte_rate=1000.5")...)
	s.run(append(b, "request_percentage=0")...)
	s.run(append(b, "request_percentage=0.5")...)
	s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--user", "alice")
	s.golden("configs_server_validation")
}

// --command-config against a cluster that requires SASL.
func TestConfigsCommandConfigSASL(t *testing.T) {
	tg := startCluster(t,
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.Superuser("PLAIN", "alice", "secret"),
	)
	s := newSession(t, tg)
	scram := s.file("scram.properties", `# SCRAM, as in Kafka's docs
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="admin" \
    password="admin";
`)
	plainProps := s.file("plain.properties", `security.protocol: SASL_PLAINTEXT
sasl.mechanism = PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="secret";
`)
	wrong := s.file("wrong.properties", `security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="nope";
`)
	gssapi := s.file("gssapi.properties", `security.protocol=SASL_PLAINTEXT
sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;
`)
	b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP"}
	s.note("SCRAM-SHA-256")
	s.run(append(b, "--command-config", scram, "--alter", "--user", "bob", "--add-config", "producer_byte_rate=1024")...)
	s.run(append(b, "--command-config", scram, "--describe", "--user", "bob")...)
	s.note("describing users also lists their SCRAM credentials, as kafka-configs does")
	s.run(append(b, "--command-config", scram, "--describe", "--entity-type", "users")...)
	s.run(append(b, "--command-config", scram, "--describe", "--entity-type", "users", "--entity-name", "admin")...)
	s.note("PLAIN")
	s.run(append(b, "--command-config", plainProps, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=2048")...)
	s.run(append(b, "--command-config", plainProps, "--describe", "--entity-type", "clients")...)
	s.note("a wrong password, and a mechanism tollgate does not speak")
	s.timeout = 3 * time.Second
	s.run(append(b, "--command-config", wrong, "--describe", "--user", "bob")...)
	s.run(append(b, "--command-config", gssapi, "--describe", "--user", "bob")...)
	s.run(append(b, "--command-config", s.dir+"/missing.properties", "--describe", "--user", "bob")...)
	s.golden("configs_sasl")
}

// --command-config with TLS: a PEM truststore, the host name check and its
// opt-out, and a client certificate.
func TestConfigsCommandConfigSSL(t *testing.T) {
	dir := t.TempDir()
	c := makeCerts(t, dir, "broker.example") // not the address dialed
	srv := c.serverTLS.Clone()
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	tg := startCluster(t, kfake.TLS(srv))
	s := newSession(t, tg)
	s.dir = dir
	mtls := s.file("mtls.properties", `security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=`+c.caFile+`
ssl.keystore.type=PEM
ssl.keystore.location=`+c.certFile+`
ssl.key.location=`+c.keyFile+`
ssl.endpoint.identification.algorithm=
`)
	bundle := s.file("bundle.properties", `security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=`+c.caFile+`
ssl.keystore.type=PEM
ssl.keystore.location=`+c.bundleFile+`
ssl.endpoint.identification.algorithm=
`)
	hostCheck := s.file("hostcheck.properties", `security.protocol=SSL
ssl.truststore.location=`+c.caFile+`
ssl.keystore.location=`+c.bundleFile+`
`)
	jks := s.file("jks.properties", `security.protocol=SSL
ssl.truststore.type=JKS
ssl.truststore.location=/etc/kafka/truststore.jks
`)
	b := []string{"configs", "--bootstrap-server", "$BOOTSTRAP"}
	s.note("client certificate and key in two files; no host name check")
	s.run(append(b, "--command-config", mtls, "--alter", "--ip-defaults", "--add-config", "connection_creation_rate=30")...)
	s.note("key and chain in one PEM keystore")
	s.run(append(b, "--command-config", bundle, "--describe", "--entity-type", "ips")...)
	s.note("the certificate names broker.example, not 127.0.0.1: the default host name check refuses it")
	s.timeout = 5 * time.Second
	code := s.run(append(b, "--command-config", hostCheck, "--describe", "--entity-type", "ips")...)
	if code != 1 {
		t.Errorf("host name check: exit %d, want 1", code)
	}
	s.run(append(b, "--command-config", jks, "--describe", "--entity-type", "ips")...)
	s.golden("configs_ssl")
}
