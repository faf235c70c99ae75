// Package kafka runs a real Apache Kafka cluster for tests and for a
// user's own try: three combined broker+controller KRaft nodes on
// loopback, started from Maven Central's jars (this directory's pom.xml;
// Classpath copies them once into a cache outside the repository) with
// kafka.tools.StorageTool format and kafka.Kafka server.properties, as
// Kafka's own quickstart does.
//
// Every node has four listeners: PLAINTEXT, SASL_PLAINTEXT (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER with Kafka's unsecured
// validator), SSL (a throwaway CA's certificate, Cluster.CA) and the
// controllers' own. The StandardAuthorizer is on, with User:ANONYMOUS (the
// PLAINTEXT and SSL listeners' principal) and User:admin super users and
// allow.everyone.if.no.acl.found, so that an ACL a test writes is enforced
// and nothing else is in the way. Topics default to replication factor 3
// and min.insync.replicas 2.
//
// A test binary shares one cluster (Shared, stopped by StopShared from its
// TestMain): three JVMs are too heavy to start per test on two cores.
// Tests that share it name their topics uniquely.
//
// It imports franz-go's kadm to wait for the cluster, and nothing of the
// project but testpki.
package kafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Config says what cluster to start.
type Config struct {
	// Version is the Kafka release (Versions; default DefaultVersion()).
	Version string
	// Nodes is the number of combined broker+controller nodes (default 3).
	Nodes int
	// HeapMB is each JVM's maximum heap (default 512).
	HeapMB int
	// Dir holds the nodes' data, configs and logs; empty: a temporary
	// directory, removed by Stop.
	Dir string
	// BasePort, when set, gives node i the ports BasePort+10*i+0..3
	// (PLAINTEXT, SASL_PLAINTEXT, SSL, controller); otherwise free ports.
	BasePort int
	// Properties are added to every node's server.properties (a test's
	// broker quota window, say).
	Properties map[string]string
}

// The SASL users every cluster has, with their passwords: PLAIN from the
// listener's JAAS config, SCRAM-SHA-256 and SCRAM-SHA-512 formatted into
// the metadata log. OAUTHBEARER takes any unsecured token's subject.
var Users = map[string]string{
	"admin": "admin-secret",
	"alice": "alice-secret",
	"bob":   "bob-secret",
}

// Listener names one of a node's client listeners.
type Listener int

const (
	Plaintext Listener = iota
	SASL
	SSL
)

// Cluster is a running Kafka cluster.
type Cluster struct {
	Version   string
	ClusterID string
	Dir       string
	// CA signed every node's SSL certificate (127.0.0.1 and localhost).
	CA *testpki.CA
	// Classpath is the directory of the release's jars.
	Classpath string
	// Started is how long the cluster took from the first JVM's start to
	// serving with every node (format included).
	Started time.Duration

	cfg      Config
	java     string
	temp     bool
	attached bool
	mu       sync.Mutex
	nodes    []*Node
}

// Node is one broker+controller process.
type Node struct {
	ID                               int32
	Plaintext, SASL, SSL, Controller string // host:port
	dir, props, log                  string
	cmd                              *exec.Cmd
	exited                           chan struct{}
}

// Start formats and starts a cluster and waits until every node serves.
// With free ports and a temporary Dir, a start whose node exits is tried on
// other ports, three times in all: the ports were free when picked, but
// another process (a second test binary starting its own cluster) may
// take one before the JVM binds it.
func Start(cfg Config) (*Cluster, error) {
	var errs []error
	for range 3 {
		c, err := start(cfg)
		if err == nil || cfg.BasePort != 0 || cfg.Dir != "" || !errors.Is(err, errNodeExited) {
			return c, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// errNodeExited is a node's JVM exiting while the cluster starts.
var errNodeExited = errors.New("a kafka node exited while starting")

func start(cfg Config) (*Cluster, error) {
	if cfg.Version == "" {
		cfg.Version = DefaultVersion()
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.HeapMB == 0 {
		cfg.HeapMB = 512
	}
	java, err := javaBin()
	if err != nil {
		return nil, err
	}
	cp, err := Classpath(cfg.Version)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Version: cfg.Version, Classpath: cp, cfg: cfg, java: java, Dir: cfg.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "tollgate-kafka-"); err != nil {
			return nil, err
		}
		c.temp = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if err := c.prepare(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.format(); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if err := c.launch(n); err != nil {
			return nil, err
		}
	}
	if err := c.waitServing(3 * time.Minute); err != nil {
		return nil, err
	}
	c.Started = time.Since(start)
	ok = true
	return c, nil
}

// prepare picks the ports, makes the CA and writes each node's config.
func (c *Cluster) prepare() error {
	// A Kafka cluster id, as Uuid.randomUuid makes it: never one that
	// starts with "-" (kafka-storage format -t would read it as an
	// option: one start in 64 failed).
	id := make([]byte, 16)
	for c.ClusterID == "" || strings.HasPrefix(c.ClusterID, "-") {
		rand.Read(id)
		c.ClusterID = base64.RawURLEncoding.EncodeToString(id)
	}
	ca, err := testpki.NewCAIn(c.Dir, "tollgate-test-kafka-ca")
	if err != nil {
		return err
	}
	c.CA = ca
	leaf, err := ca.IssueErr(testpki.ServerTemplate("kafka"))
	if err != nil {
		return err
	}
	ports, err := c.ports(4 * c.cfg.Nodes)
	if err != nil {
		return err
	}
	for i := range c.cfg.Nodes {
		n := &Node{ID: int32(i + 1), dir: filepath.Join(c.Dir, fmt.Sprintf("node-%d", i+1))}
		addr := func(j int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[4*i+j])) }
		n.Plaintext, n.SASL, n.SSL, n.Controller = addr(0), addr(1), addr(2), addr(3)
		n.props = filepath.Join(n.dir, "server.properties")
		n.log = filepath.Join(n.dir, "server.out")
		if err := os.MkdirAll(filepath.Join(n.dir, "data"), 0o755); err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(n.props, []byte(c.properties(n, leaf)), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(log4j2Config(n.dir)), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.dir, "log4j.properties"), []byte(log4jConfig(n.dir)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ports returns n ports: BasePort's, or free ones (listened on and let
// go: another process could take one meanwhile, which the start reports).
func (c *Cluster) ports(n int) ([]int, error) {
	out := make([]int, 0, n)
	if c.cfg.BasePort > 0 {
		for i := range n {
			out = append(out, c.cfg.BasePort+10*(i/4)+i%4)
		}
		return out, nil
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// properties is node n's server.properties.
func (c *Cluster) properties(n *Node, leaf *testpki.Leaf) string {
	var voters []string
	for _, m := range c.nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", m.ID, m.Controller))
	}
	var plainUsers strings.Builder
	for u, p := range Users {
		fmt.Fprintf(&plainUsers, " user_%s=%q", u, p)
	}
	pemLine := func(b []byte) string { return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`) }
	p := [][2]string{
		{"process.roles", "broker,controller"},
		{"node.id", strconv.Itoa(int(n.ID))},
		{"controller.quorum.voters", strings.Join(voters, ",")},
		{"listeners", fmt.Sprintf("PLAINTEXT://%s,SASL_PLAINTEXT://%s,SSL://%s,CONTROLLER://%s", n.Plaintext, n.SASL, n.SSL, n.Controller)},
		{"advertised.listeners", fmt.Sprintf("PLAINTEXT://%s,SASL_PLAINTEXT://%s,SSL://%s", n.Plaintext, n.SASL, n.SSL)},
		{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"},
		{"controller.listener.names", "CONTROLLER"},
		{"inter.broker.listener.name", "PLAINTEXT"},
		{"log.dirs", filepath.Join(n.dir, "data")},
		// Small: two cores for three JVMs.
		{"num.network.threads", "2"},
		{"num.io.threads", "2"},
		{"background.threads", "2"},
		{"num.replica.fetchers", "1"},
		{"num.recovery.threads.per.data.dir", "1"},
		{"log.cleaner.threads", "1"},
		{"num.partitions", "3"},
		{"default.replication.factor", "3"},
		{"min.insync.replicas", "2"},
		{"offsets.topic.replication.factor", "3"},
		{"offsets.topic.num.partitions", "6"},
		{"transaction.state.log.replication.factor", "3"},
		{"transaction.state.log.min.isr", "2"},
		{"transaction.state.log.num.partitions", "6"},
		{"share.coordinator.state.topic.replication.factor", "3"},
		{"share.coordinator.state.topic.min.isr", "2"},
		{"share.coordinator.state.topic.num.partitions", "3"},
		{"group.initial.rebalance.delay.ms", "0"},
		{"auto.create.topics.enable", "true"},
		{"authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
		{"super.users", "User:ANONYMOUS;User:admin"},
		{"allow.everyone.if.no.acl.found", "true"},
		{"sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"},
		{"listener.name.sasl_plaintext.plain.sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required" + plainUsers.String() + ";"},
		{"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
		{"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
		{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";`},
		{"ssl.keystore.type", "PEM"},
		{"ssl.keystore.certificate.chain", pemLine(leaf.CertPEM)},
		{"ssl.keystore.key", pemLine(leaf.KeyPEM)},
		{"ssl.truststore.type", "PEM"},
		{"ssl.truststore.certificates", pemLine(c.CA.CertPEM)},
		{"ssl.client.auth", "none"},
	}
	var b strings.Builder
	for _, kv := range p {
		if _, over := c.cfg.Properties[kv[0]]; over {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	for k, v := range c.cfg.Properties {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.String()
}

func log4j2Config(dir string) string {
	return `status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ` + filepath.Join(dir, "server.log") + `
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
`
}

func log4jConfig(dir string) string {
	return `log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=` + filepath.Join(dir, "server.log") + `
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
`
}

// jvm is the command line of a JVM running class main with args, small:
// two cores for three brokers and the tests.
func (c *Cluster) jvm(dir, main string, args ...string) *exec.Cmd {
	base := []string{
		"-Xms64m", fmt.Sprintf("-Xmx%dm", c.cfg.HeapMB),
		"-XX:+UseG1GC", "-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2",
		"-XX:MaxDirectMemorySize=256m", "-XX:-UsePerfData", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties"),
		"-Dlog4j.configuration=file:" + filepath.Join(dir, "log4j.properties"),
		"-cp", filepath.Join(c.Classpath, "*"), main,
	}
	cmd := exec.Command(c.java, append(base, args...)...)
	cmd.Dir = dir
	return cmd
}

// format runs kafka.tools.StorageTool format on every node, with the SASL
// users' SCRAM credentials.
func (c *Cluster) format() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		args := []string{"format", "-t", c.ClusterID, "-c", n.props, "--ignore-formatted"}
		for u, p := range Users {
			for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
				args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u, p))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.jvm(n.dir, "kafka.tools.StorageTool", args...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("kafka-storage format (node %d): %v\n%s", n.ID, err, tail(string(out), 20))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// launch starts node n's JVM. The process is started from a thread that
// never exits with the parent-death signal set, so that a test binary
// killed mid-run takes its brokers with it.
func (c *Cluster) launch(n *Node) error {
	out, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := c.jvm(n.dir, "kafka.Kafka", n.props)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := startOnLockedThread(cmd); err != nil {
		out.Close()
		return fmt.Errorf("start node %d: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		out.Close()
		close(exited)
	}()
	c.mu.Lock()
	n.cmd, n.exited = cmd, exited
	c.mu.Unlock()
	return nil
}

var spawner struct {
	mu   sync.Mutex
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startOnLockedThread starts cmd from one OS thread that lives until
// stopSpawner: Pdeathsig fires when the thread that forked the child
// exits, not the process, and Go may retire an idle thread.
func startOnLockedThread(cmd *exec.Cmd) error {
	spawner.mu.Lock()
	if spawner.reqs == nil {
		reqs, done := make(chan spawnReq), make(chan struct{})
		spawner.reqs, spawner.done = reqs, done
		go func() {
			// Never unlocked: the thread ends with the goroutine, after
			// every child it started is gone (stopSpawner).
			runtime.LockOSThread()
			defer close(done)
			for r := range reqs {
				r.done <- r.cmd.Start()
			}
		}()
	}
	reqs := spawner.reqs
	spawner.mu.Unlock()
	done := make(chan error, 1)
	reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// stopSpawner ends the spawning thread once no child it started runs.
func stopSpawner() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.reqs != nil {
		close(spawner.reqs)
		<-spawner.done
		spawner.reqs, spawner.done = nil, nil
	}
}

// waitServing waits until every running node, asked itself, lists every
// running node as a broker of the cluster (each broker's metadata cache
// has caught up), or one exits, or d passes.
func (c *Cluster) waitServing(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last string
	for {
		running := map[int32]bool{}
		for _, n := range c.Nodes() {
			if n.cmd != nil && n.hasExited() {
				return fmt.Errorf("%w: node %d; the end of %s:\n%s", errNodeExited, n.ID, n.log, n.tailLog(30))
			}
			if n.cmd != nil {
				running[n.ID] = true
			}
		}
		ready := true
		for id := range running {
			seen, err := c.Node(id).brokers(ctx)
			if err != nil || len(seen) < len(running) {
				ready = false
				last = fmt.Sprintf("node %d lists brokers %v (%v)", id, seen, err)
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka cluster not serving %d brokers within %v (%s); the end of node 1's log:\n%s",
				len(running), d, last, c.nodes[0].tailLog(30))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// brokers asks node n alone for the cluster's brokers.
func (n *Node) brokers(ctx context.Context) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Plaintext), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids, nil
}

func (n *Node) hasExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

func (n *Node) tailLog(lines int) string {
	b, _ := os.ReadFile(n.log)
	s := tail(string(b), lines)
	if l, err := os.ReadFile(filepath.Join(n.dir, "server.log")); err == nil {
		s += "\n--- server.log:\n" + tail(string(l), lines)
	}
	return s
}

// running is the number of nodes whose JVM runs.
func (c *Cluster) running() int {
	k := 0
	for _, n := range c.Nodes() {
		if n.cmd != nil && !n.hasExited() {
			k++
		}
	}
	return k
}

// Nodes returns the nodes, by id.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node returns the node with id.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Bootstrap lists every node's address on listener l.
func (c *Cluster) Bootstrap(l Listener) []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.Addr(l))
	}
	return out
}

// Addr is the node's address on listener l.
func (n *Node) Addr(l Listener) string {
	switch l {
	case SASL:
		return n.SASL
	case SSL:
		return n.SSL
	default:
		return n.Plaintext
	}
}

// PID is the node's JVM process id, 0 when it is not running.
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil || n.hasExited() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL to node id's JVM and waits for it to exit.
func (c *Cluster) Kill(id int32) error {
	if c.attached {
		return errAttached
	}
	n := c.Node(id)
	if n == nil || n.cmd == nil {
		return fmt.Errorf("no kafka node %d running", id)
	}
	n.cmd.Process.Kill()
	<-n.exited
	return nil
}

// Terminate stops node id gracefully (SIGTERM: a controlled shutdown that
// moves its leaderships away first), SIGKILL after d.
func (c *Cluster) Terminate(id int32, d time.Duration) error {
	if c.attached {
		return errAttached
	}
	n := c.Node(id)
	if n == nil || n.cmd == nil {
		return fmt.Errorf("no kafka node %d running", id)
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(d):
		n.cmd.Process.Kill()
		<-n.exited
	}
	return nil
}

// Restart starts node id again (after Kill or Terminate) and waits until
// it is a broker of the cluster again.
func (c *Cluster) Restart(id int32) error {
	if c.attached {
		return errAttached
	}
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("no kafka node %d", id)
	}
	if n.cmd != nil && !n.hasExited() {
		return fmt.Errorf("kafka node %d is running", id)
	}
	if err := c.launch(n); err != nil {
		return err
	}
	return c.waitServing(2 * time.Minute)
}

// Pause stops node id's JVM with SIGSTOP (a broker that stalls); Resume
// lets it go on.
func (c *Cluster) Pause(id int32) error { return c.signal(id, syscall.SIGSTOP) }

// Resume continues a paused node.
func (c *Cluster) Resume(id int32) error { return c.signal(id, syscall.SIGCONT) }

func (c *Cluster) signal(id int32, sig syscall.Signal) error {
	if c.attached {
		return errAttached
	}
	n := c.Node(id)
	if n == nil || n.PID() == 0 {
		return fmt.Errorf("no kafka node %d running", id)
	}
	return n.cmd.Process.Signal(sig)
}

// Stop kills every node and removes a temporary Dir. It waits for the
// JVMs to exit.
func (c *Cluster) Stop() {
	if c.attached {
		return
	}
	for _, n := range c.Nodes() {
		if n.cmd != nil && !n.hasExited() {
			n.cmd.Process.Signal(syscall.SIGCONT)
			n.cmd.Process.Kill()
			<-n.exited
		}
	}
	if c.temp {
		os.RemoveAll(c.Dir)
	}
}

// Java runs a class of the release's jars (a Kafka tool: ConfigCommand,
// ProducerPerformance, ...) with args, in dir, with a small heap (Tool).
func (c *Cluster) Java(dir, main string, args ...string) *exec.Cmd {
	return toolCmd(c.java, c.Classpath, dir, main, args...)
}

// AdminOpts are franz-go options for a client of the cluster straight
// (not through Tollgate) as the super user admin over SASL PLAIN.
func (c *Cluster) AdminOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap(SASL)...),
		kgo.SASL(plain.Auth{User: "admin", Pass: Users["admin"]}.AsMechanism()),
	}
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared starts this test binary's cluster on first use (DefaultVersion)
// and returns it; every later call returns the same cluster, or the same
// error. With TOLLGATE_KAFKA_CLUSTER naming a running cluster's
// cluster.json (scripts/kafka-dev.sh prints it), it attaches to that one
// instead: quicker while developing, and several test binaries share it.
func Shared() (*Cluster, error) {
	shared.once.Do(func() {
		if p := os.Getenv("TOLLGATE_KAFKA_CLUSTER"); p != "" {
			shared.c, shared.err = Attach(p)
			return
		}
		shared.c, shared.err = Start(Config{})
	})
	return shared.c, shared.err
}

// StopShared stops the shared cluster if one was started. A test binary's
// TestMain calls it after the tests.
func StopShared() {
	shared.once.Do(func() { shared.err = errors.New("kafka: the shared cluster was stopped") })
	if shared.c != nil {
		shared.c.Stop()
	}
	stopSpawner()
}
