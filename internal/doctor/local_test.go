package doctor

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/store"
)

func TestPorts(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().String()
	free := closedAddr(t)
	_, fp, _ := net.SplitHostPort(free)
	freePort, _ := strconv.Atoi(fp)

	r := newRunner(Target{Listeners: []Listener{{Name: "PLAINTEXT", Bootstrap: free}}, HTTPAddress: "127.0.0.1:0"})
	want(t, r.ports(), OK, "1 free: "+free)

	r = newRunner(Target{Listeners: []Listener{{Name: "PLAINTEXT", Bootstrap: busy}}})
	want(t, r.ports(), Fail, "listener PLAINTEXT bootstrap "+busy+" is in use", "ss -ltnp")

	r = newRunner(Target{Listeners: []Listener{{Name: "PLAINTEXT", Bootstrap: free}}, HTTPAddress: busy})
	want(t, r.ports(), Fail, "admin HTTP port "+busy+" is in use")

	// The broker ports follow the upstream's node ids: one of them is held.
	_, bp, _ := net.SplitHostPort(busy)
	busyPort, _ := strconv.Atoi(bp)
	r = newRunner(Target{Listeners: []Listener{{Name: "EXT", Bootstrap: free, BrokerPortBase: busyPort - 2}}})
	r.brokers = []broker{{ID: 0}, {ID: 1}, {ID: 2}}
	want(t, r.ports(), Fail, "listener EXT broker 2 "+busy+" is in use")
	r.brokers = nil // upstream unknown
	want(t, r.ports(), Warn, "broker ports of listener EXT not checked")

	// Two listeners on one port, the broker range over the admin port, an
	// address of another host, a port past 65535.
	r = newRunner(Target{
		Listeners:   []Listener{{Name: "A", Bootstrap: free}, {Name: "B", Bootstrap: "0.0.0.0:" + fp}},
		HTTPAddress: "127.0.0.1:" + strconv.Itoa(freePort+1),
	})
	want(t, r.ports(), Fail, "listener A bootstrap and listener B bootstrap both use")
	r = newRunner(Target{Listeners: []Listener{{Name: "A", Bootstrap: free, BrokerPortBase: freePort + 1}}, HTTPAddress: "127.0.0.1:" + strconv.Itoa(freePort+2)})
	r.brokers = []broker{{ID: 0}, {ID: 1}}
	want(t, r.ports(), Fail, "listener A broker 1 and admin HTTP port both use", "distinct ports")
	if ln, err := net.Listen("tcp", "192.0.2.7:0"); err == nil { // TEST-NET-1; a host may allow non-local binds
		ln.Close()
		t.Log("this host binds addresses it does not have: not-an-address case skipped")
	} else {
		r = newRunner(Target{Listeners: []Listener{{Name: "A", Bootstrap: "192.0.2.7:9092"}}})
		want(t, r.ports(), Fail, "192.0.2.7 is not an address of this host", "advertised_host")
	}
	r = newRunner(Target{Listeners: []Listener{{Name: "A", Bootstrap: free, BrokerPortBase: 65535}}})
	r.brokers = []broker{{ID: 0}, {ID: 3}}
	want(t, r.ports(), Fail, "port 65538 is beyond 65535")
}

func TestDataDir(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(Target{DataDir: dir})
	want(t, r.dataDir(), OK, dir+" is writable", "fsync took")

	// Not there yet: it will be created, and the check leaves nothing.
	missing := filepath.Join(dir, "a", "b")
	r = newRunner(Target{DataDir: missing})
	want(t, r.dataDir(), OK, "does not exist yet", dir+" is writable")
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the check left %v behind", ents)
	}

	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	want(t, newRunner(Target{DataDir: file}).dataDir(), Fail, "is not a directory")

	// A running Tollgate holds the store.
	sdir := filepath.Join(dir, "store")
	st, err := store.Open(sdir)
	if err != nil {
		t.Fatal(err)
	}
	want(t, newRunner(Target{DataDir: sdir}).dataDir(), Fail, "tollgate.db is locked by another process", "own data_dir")
	st.Close()
	want(t, newRunner(Target{DataDir: sdir}).dataDir(), OK)
}

// dataDirChild runs the data_dir check in a child process as another user
// (root writes anywhere, so a read-only directory means nothing to it).
const dataDirChild = "TOLLGATE_DOCTOR_DATADIR_CHILD"

func TestDataDirChild(t *testing.T) {
	dir := os.Getenv(dataDirChild)
	if dir == "" {
		t.Skip("helper of TestDataDirReadOnly")
	}
	json.NewEncoder(os.Stdout).Encode(newRunner(Target{DataDir: dir}).dataDir())
}

func TestDataDirReadOnly(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses Linux credentials")
	}
	base, err := os.MkdirTemp("", "doctor-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	ro := filepath.Join(base, "data")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{ro, filepath.Join(ro, "sub")} { // existing, and to be created
		var res Result
		if os.Geteuid() != 0 {
			res = newRunner(Target{DataDir: d}).dataDir()
		} else {
			bin := filepath.Join(base, "doctor.test")
			if _, err := os.Stat(bin); err != nil {
				copyFile(t, os.Args[0], bin)
			}
			cmd := exec.Command(bin, "-test.run=^TestDataDirChild$")
			cmd.Env = append(os.Environ(), dataDirChild+"="+d)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if err := json.NewDecoder(bytes.NewReader(out)).Decode(&res); err != nil {
				t.Fatalf("child said %q: %v", out, err)
			}
		}
		want(t, res, Fail, "permission denied", "chown tollgate")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFilesystem(t *testing.T) {
	for _, c := range []struct {
		fs   string
		opts []string
		want Status
		say  string
	}{
		{"ext4", []string{"rw", "relatime"}, OK, "ext4 (rw,relatime)"},
		{"xfs", nil, OK, "xfs"},
		{"tmpfs", []string{"rw"}, Warn, "lost at reboot"},
		{"nfs4", nil, Warn, "network"},
		{"fuse", nil, Warn, "network or user-space"},
		{"ext4", []string{"rw", "nobarrier"}, Warn, "without write barriers"},
		{"ext4", []string{"rw", "barrier=0"}, Warn, "without write barriers"},
	} {
		s, detail, fix := classifyFS(c.fs, c.opts)
		if s != c.want || !strings.Contains(detail, c.say) || (s != OK && fix == "") {
			t.Errorf("classifyFS(%s, %v) = %s %q %q", c.fs, c.opts, s, detail, fix)
		}
	}

	const mountinfo = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=100k
30 25 0:27 / /dev/shm rw,nosuid - tmpfs tmpfs rw,size=200k
40 27 0:40 / /var/lib/my\040data rw - xfs /dev/vdb rw,nobarrier
41 27 0:41 / /var/lib/my rw - nfs4 srv:/x rw
`
	for _, c := range []struct{ path, fs, opt string }{
		{"/etc/passwd", "ext4", "discard"},
		{"/dev/shm/x", "tmpfs", "size=200k"}, // the later mount hides the earlier
		{"/var/lib/my data/db", "xfs", "nobarrier"},
		{"/var/lib/my", "nfs4", "rw"},
		{"/var/lib/myother", "ext4", "rw"},
	} {
		fs, opts, ok, err := mountOf(strings.NewReader(mountinfo), c.path)
		if err != nil || !ok || fs != c.fs || !strings.Contains(strings.Join(opts, ","), c.opt) {
			t.Errorf("mountOf(%s) = %s %v %v %v", c.path, fs, opts, ok, err)
		}
	}

	if runtime.GOOS != "linux" {
		return
	}
	// The real thing: the test's temporary directory, and /dev/shm (tmpfs).
	res := newRunner(Target{DataDir: t.TempDir()}).filesystem()
	if res.Status == Fail || res.Detail == "" {
		t.Errorf("filesystem of the temp dir: %+v", res)
	}
	if fs, _, err := filesystemOf("/dev/shm"); err == nil && fs == "tmpfs" {
		want(t, newRunner(Target{DataDir: "/dev/shm/tollgate"}).filesystem(), Warn, "tmpfs", "memory filesystem")
	}
}

// tlsFixture writes a CA, and a server certificate for hosts signed by it,
// valid from notBefore to notAfter; it returns the file paths.
func tlsFixture(t *testing.T, notBefore, notAfter time.Time, hosts ...string) (cert, key, ca string) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "doctor test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "tollgate"},
		NotBefore: notBefore, NotAfter: notAfter, DNSNames: hosts,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

func TestTLS(t *testing.T) {
	now := time.Now()
	check := func(f TLSFiles) Result { return newRunner(Target{TLS: []TLSFiles{f}}).tlsFiles()[0] }

	cert, key, ca := tlsFixture(t, now.Add(-time.Hour), now.Add(90*24*time.Hour), "tollgate.example.com")
	want(t, check(TLSFiles{Name: "listener EXT", CertFile: cert, KeyFile: key, CAFile: ca, Hosts: []string{"tollgate.example.com"}}), OK, "CN=tollgate valid until", "1 CA certificates")
	want(t, check(TLSFiles{Name: "listener EXT", CertFile: cert, KeyFile: key, Hosts: []string{"other.example.com"}}), Warn, "does not cover other.example.com", "subject alternative names")

	cert3, key3, _ := tlsFixture(t, now.Add(-time.Hour), now.Add(3*24*time.Hour), "tollgate.example.com")
	res := check(TLSFiles{Name: "listener EXT", CertFile: cert3, KeyFile: key3})
	want(t, res, Warn, "expires in 2 days 23 hours", "renew the certificate")
	if res.Check != "tls listener EXT" {
		t.Errorf("check name %q", res.Check)
	}

	certOld, keyOld, _ := tlsFixture(t, now.Add(-48*time.Hour), now.Add(-time.Hour))
	want(t, check(TLSFiles{Name: "upstream", CertFile: certOld, KeyFile: keyOld}), Fail, "expired")
	certNew, keyNew, _ := tlsFixture(t, now.Add(48*time.Hour), now.Add(96*time.Hour))
	want(t, check(TLSFiles{Name: "upstream", CertFile: certNew, KeyFile: keyNew}), Fail, "not valid before", "clock")

	// A key of another certificate, a missing file, a CA file of garbage.
	want(t, check(TLSFiles{Name: "x", CertFile: cert, KeyFile: key3}), Fail, "private key does not match")
	want(t, check(TLSFiles{Name: "x", CertFile: filepath.Join(t.TempDir(), "none.pem"), KeyFile: key}), Fail, "no such file")
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	want(t, check(TLSFiles{Name: "upstream", CAFile: junk}), Fail, "no PEM certificates")

	if rs := newRunner(Target{}).tlsFiles(); len(rs) != 1 || rs[0].Status != OK || rs[0].Detail != "no TLS configured" {
		t.Errorf("no TLS: %+v", rs)
	}
}

func TestOpenFiles(t *testing.T) {
	limit, err := openFilesLimit()
	if err != nil {
		t.Fatal(err)
	}
	settings := func(kv ...string) admission.Settings {
		s := admission.DefaultSettings()
		s.Listeners = []admission.ListenerSettings{{Name: "PLAINTEXT"}}
		for i := 0; i < len(kv); i += 2 {
			if err := s.Set(kv[i], kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	target := func(s admission.Settings) *runner {
		r := newRunner(Target{Listeners: []Listener{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:9092"}}, HTTPAddress: "127.0.0.1:9644", Admission: s})
		r.brokers = []broker{{ID: 0}, {ID: 1}, {ID: 2}}
		return r
	}
	// Fits: half of what this process may open, less the overhead.
	fits := (int(limit) - int(RequiredOpenFiles(0, 3, 5))) / 2
	if fits < 1 {
		t.Skipf("open-files limit %d is too low to test", limit)
	}
	want(t, target(settings("max.connections", strconv.Itoa(fits))).openFiles(), OK, "limit "+strconv.FormatUint(limit, 10), "2 × "+strconv.Itoa(fits))
	want(t, target(settings("max.connections", strconv.Itoa(fits+1))).openFiles(), Fail, "LimitNOFILE=", "lower max.connections to "+strconv.Itoa(fits))
	want(t, target(settings()).openFiles(), Warn, "max.connections is not set", "at most "+strconv.Itoa(fits))
	// A listener limit bounds it too.
	want(t, target(settings("listener.name.plaintext.max.connections", "10")).openFiles(), OK, "2 × 10 connections")
}

func TestMaxConnections(t *testing.T) {
	const u = admission.Unlimited
	for _, c := range []struct {
		max       int
		listeners []admission.ListenerSettings
		want      int
		bounded   bool
	}{
		{u, nil, u, false},
		{100, nil, 100, true},
		{100, []admission.ListenerSettings{{Name: "A"}}, 100, true},
		{100, []admission.ListenerSettings{{Name: "A", MaxConnections: 30}, {Name: "B", MaxConnections: 20}}, 50, true},
		{u, []admission.ListenerSettings{{Name: "A", MaxConnections: 30}, {Name: "B"}}, u, false},
		// An exempt listener may go past max.connections by its own limit...
		{100, []admission.ListenerSettings{{Name: "A"}, {Name: "OPS", Exempt: true, MaxConnections: 5}}, 105, true},
		// ...and without one nothing bounds it.
		{100, []admission.ListenerSettings{{Name: "A"}, {Name: "OPS", Exempt: true}}, u, false},
		// The exemption needs a second listener, as in Kafka.
		{100, []admission.ListenerSettings{{Name: "OPS", Exempt: true}}, 100, true},
	} {
		s := admission.DefaultSettings()
		s.MaxConnections, s.Listeners = c.max, c.listeners
		if n, ok := MaxConnections(s); n != c.want || ok != c.bounded {
			t.Errorf("MaxConnections(%d, %+v) = %d %v, want %d %v", c.max, c.listeners, n, ok, c.want, c.bounded)
		}
	}
}

// Run end to end on a healthy setup: safe, with the table saying so.
func TestRunAndTable(t *testing.T) {
	c := cluster(t)
	s := admission.DefaultSettings()
	s.Listeners = []admission.ListenerSettings{{Name: "PLAINTEXT"}}
	s.MaxConnections = 100
	cert, key, ca := tlsFixture(t, time.Now().Add(-time.Hour), time.Now().Add(3*24*time.Hour), "localhost")
	brokerClock(t, c, 0)
	rs := Run(testCtx(t), Target{
		Upstream:    c.ListenAddrs(),
		Listeners:   []Listener{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		HTTPAddress: "127.0.0.1:0",
		DataDir:     filepath.Join(t.TempDir(), "data"),
		TLS:         []TLSFiles{{Name: "listener PLAINTEXT", CertFile: cert, KeyFile: key, CAFile: ca, Hosts: []string{"localhost"}}},
		Admission:   s,
		ClockTopic:  "doctor-clock",
	})
	var names []string
	for _, r := range rs {
		names = append(names, r.Check)
	}
	if got := strings.Join(names, ","); got != "upstream,advertised addresses,ports,data_dir,data_dir filesystem,tls listener PLAINTEXT,open files,clock,broker quotas" {
		t.Fatalf("checks: %s", got)
	}
	if !Safe(rs) {
		t.Fatalf("not safe: %+v", rs)
	}
	var buf bytes.Buffer
	WriteTable(&buf, rs)
	out := buf.String()
	if !strings.Contains(out, "STATUS  CHECK") || !strings.Contains(out, "WARN    tls listener PLAINTEXT") || !strings.Contains(out, "fix: renew the certificate") || !strings.Contains(out, ": safe to start") {
		t.Errorf("table:\n%s", out)
	}
	buf.Reset()
	WriteJSON(&buf, rs)
	var js struct {
		Safe    bool
		Results []struct{ Check, Status, Detail, Fix string }
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil || !js.Safe || len(js.Results) != len(rs) || js.Results[5].Status != "WARN" {
		t.Errorf("json: %v %s", err, buf.String())
	}

	rs = append(rs, Result{Check: "x", Status: Fail, Detail: "broken", Fix: "mend it"})
	buf.Reset()
	WriteTable(&buf, rs)
	if Safe(rs) || !strings.Contains(buf.String(), "NOT safe to start") {
		t.Errorf("a failure is not safe:\n%s", buf.String())
	}
}
