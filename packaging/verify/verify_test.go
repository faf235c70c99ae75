// Package verify tests the release artifacts as they come out of the one
// build command (go run ./packaging/build): it runs the command once for
// linux/amd64 (cross-compiling the other targets is the command's job, not
// the tests'), then reads the binary, the OCI image, the .deb and the .rpm
// back with Go readers and checks what they hold against the config
// reference. It runs the command outside the race detector, so packaging
// costs what it costs a user.
package verify

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blakesmith/ar"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	rpmutils "github.com/sassoftware/go-rpmutils"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/doctor"
)

const (
	testVersion = "1.2.3-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	// testEpoch is 2026-01-02T03:04:05Z, stamped as SOURCE_DATE_EPOCH.
	testEpoch = 1767323045
	caBundle  = "/etc/ssl/certs/ca-certificates.crt"
)

var testTime = time.Unix(testEpoch, 0).UTC()

// dist is the build command's output, made once for every test.
var dist struct {
	once sync.Once
	tmp  string
	dir  string // the output of the first run
	dir2 string // of a second run, for reproducibility
	took time.Duration
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dist.tmp != "" {
		os.RemoveAll(dist.tmp)
	}
	os.Exit(code)
}

// runBuild runs the build command for linux/amd64 into out.
func runBuild(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "run", "./packaging/build", "-targets", "linux/amd64", "-out", out, "-version", testVersion, "-commit", testCommit)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.Itoa(testEpoch))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go run ./packaging/build: %w\n%s", err, b)
	}
	return nil
}

func built(t *testing.T) string {
	t.Helper()
	dist.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if dist.tmp, dist.err = os.MkdirTemp("", "tollgate-dist-"); dist.err != nil {
			return
		}
		dist.dir, dist.dir2 = filepath.Join(dist.tmp, "dist"), filepath.Join(dist.tmp, "dist2")
		start := time.Now()
		if dist.err = runBuild(ctx, dist.dir); dist.err != nil {
			return
		}
		dist.took = time.Since(start)
		dist.err = runBuild(ctx, dist.dir2)
	})
	if dist.err != nil {
		t.Fatal(dist.err)
	}
	return dist.dir
}

func binPath(t *testing.T) string { return filepath.Join(built(t), "bin", "linux_amd64", "tollgate") }

func hostIsLinuxAMD64() bool { return runtime.GOOS == "linux" && runtime.GOARCH == "amd64" }

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The binary is static (CGO_ENABLED=0: no interpreter, no shared
// libraries) and reports the build it was stamped with.
func TestBinary(t *testing.T) {
	bin := binPath(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("machine %s", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
	if !hostIsLinuxAMD64() {
		t.Skip("cannot run a linux/amd64 binary here")
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit, Date, Go, Platform string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != testVersion || v.Commit != testCommit || v.Date != "2026-01-02T03:04:05Z" || v.Platform != "linux/amd64" || !strings.HasPrefix(v.Go, "go1.") {
		t.Errorf("version: %+v", v)
	}
}

// layerFiles reads an image's single layer.
func layerFiles(t *testing.T, img v1.Image) map[string]*tarEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %d", err, len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return readTar(t, rc)
}

type tarEntry struct {
	hdr  tar.Header
	data []byte
}

func readTar(t *testing.T, r io.Reader) map[string]*tarEntry {
	t.Helper()
	out := map[string]*tarEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"), "/")
		out[name] = &tarEntry{*h, data}
	}
}

// portOf is the port of a host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestImage(t *testing.T) {
	bin := binPath(t)
	ca := ""
	if _, err := os.Stat(caBundle); err == nil {
		ca = caBundle // the build takes the build machine's
	}
	// The OCI layout: index.json names the tag and holds a platform index.
	p, err := layout.FromPath(filepath.Join(built(t), "image"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := top.IndexManifest()
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json: %+v", tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("platform index: %+v", im.Manifests)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, bin, ca)

	// The `docker load` tarball holds the same image.
	fromTar, err := tarball.ImageFromPath(filepath.Join(built(t), "tollgate_"+testVersion+"_image_linux_amd64.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := fromTar.ConfigName()
	b, _ := img.ConfigName()
	if a != b {
		t.Errorf("the docker tarball holds config %s, the layout %s", a, b)
	}

	// Same commit, same bytes: a second build gives the same image.
	p2, err := layout.FromPath(filepath.Join(dist.dir2, "image"))
	if err != nil {
		t.Fatal(err)
	}
	top2, _ := p2.ImageIndex()
	tm2, _ := top2.IndexManifest()
	if tm2.Manifests[0].Digest != tm.Manifests[0].Digest {
		t.Errorf("image not reproducible: %s then %s", tm.Manifests[0].Digest, tm2.Manifests[0].Digest)
	}
}

func checkImage(t *testing.T, img v1.Image, bin, ca string) {
	t.Helper()
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}
	m, _ := img.Manifest()
	if m.Config.MediaType != types.OCIConfigJSON || m.Annotations["org.opencontainers.image.revision"] != testCommit {
		t.Errorf("manifest: %+v", m)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(testTime) {
		t.Errorf("platform %s/%s created %s", cf.OS, cf.Architecture, cf.Created)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q: want the non-root 65532", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/tollgate" || strings.Join(c.Cmd, " ") != "serve --config /etc/tollgate/tollgate.yaml" {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.Labels["org.opencontainers.image.version"] != testVersion || c.Labels["org.opencontainers.image.revision"] != testCommit {
		t.Errorf("labels %v", c.Labels)
	}
	if _, ok := c.Volumes["/var/lib/tollgate"]; !ok || c.WorkingDir != "/var/lib/tollgate" || c.StopSignal != "SIGTERM" {
		t.Errorf("volumes %v workdir %q stop %q", c.Volumes, c.WorkingDir, c.StopSignal)
	}

	// The image's config file is one the real loader accepts, and the
	// image exposes exactly its ports and health-checks its admin port.
	files := layerFiles(t, img)
	cfgFile := files["/etc/tollgate/tollgate.yaml"]
	if cfgFile == nil {
		t.Fatal("no /etc/tollgate/tollgate.yaml in the image")
	}
	cfg, err := app.Parse("image tollgate.yaml", bytes.NewReader(cfgFile.data))
	if err != nil {
		t.Fatal(err)
	}
	wantPorts := map[string]struct{}{fmt.Sprintf("%d/tcp", portOf(t, cfg.HTTP.Address)): {}}
	brokers := cfg.DevCluster.Brokers
	if brokers == 0 {
		brokers = 3
	}
	for _, l := range cfg.Listeners {
		wantPorts[fmt.Sprintf("%d/tcp", portOf(t, l.Bootstrap))] = struct{}{}
		for n := range brokers {
			wantPorts[fmt.Sprintf("%d/tcp", l.BrokerPortBase+n)] = struct{}{}
		}
	}
	if fmt.Sprint(sortedKeys(c.ExposedPorts)) != fmt.Sprint(sortedKeys(wantPorts)) {
		t.Errorf("exposed %v, the config listens on %v", sortedKeys(c.ExposedPorts), sortedKeys(wantPorts))
	}
	hc := c.Healthcheck
	wantTest := fmt.Sprintf("CMD /usr/local/bin/tollgate health --url http://127.0.0.1:%d/readyz", portOf(t, cfg.HTTP.Address))
	if hc == nil || strings.Join(hc.Test, " ") != wantTest || hc.Interval != 10*time.Second || hc.Timeout != 3*time.Second || hc.Retries != 3 || hc.StartPeriod <= 0 {
		t.Errorf("healthcheck %+v, want test %q", hc, wantTest)
	}
	if cfg.DataDir != "/var/lib/tollgate" {
		t.Errorf("data_dir %q", cfg.DataDir)
	}

	// The files: the binary, a non-root user matching User, its data dir.
	b := files["/usr/local/bin/tollgate"]
	if b == nil || b.hdr.Mode != 0o755 || b.hdr.Uid != 0 || sum(b.data) != sum(readFile(t, bin)) {
		t.Fatalf("binary in the image: %+v", b)
	}
	passwd := files["/etc/passwd"]
	if passwd == nil || !strings.Contains(string(passwd.data), "\nnonroot:x:65532:65532:") || !strings.Contains(string(files["/etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("passwd/group: %v", files["/etc/passwd"])
	}
	for dir, owner := range map[string]int{"/var/lib/tollgate": 65532, "/home/nonroot": 65532} {
		d := files[dir]
		if d == nil || d.hdr.Typeflag != tar.TypeDir || d.hdr.Uid != owner || d.hdr.Mode != 0o700 {
			t.Errorf("%s: %+v", dir, d)
		}
	}
	if tmp := files["/tmp"]; tmp == nil || tmp.hdr.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", tmp)
	}
	if ca != "" {
		if c := files[caBundle]; c == nil || sum(c.data) != sum(readFile(t, ca)) {
			t.Errorf("CA bundle missing or different")
		}
	}
	for name, e := range files {
		if !e.hdr.ModTime.Equal(testTime) {
			t.Errorf("%s: mtime %s, want the build's", name, e.hdr.ModTime)
		}
		if strings.HasPrefix(name, "/bin") || name == "/usr/bin/sh" {
			t.Errorf("the image has %s: distroless means no shell", name)
		}
	}
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pkgFile is one entry of a package, as read back from it.
type pkgFile struct {
	mode   fs.FileMode
	dir    bool
	data   []byte
	config bool
}

// pkgPath is a package the build made, by file name.
func pkgPath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(built(t), name)
	if _, err := os.Stat(p); err != nil {
		ents, _ := os.ReadDir(built(t))
		t.Fatalf("%v; the build made %v", err, ents)
	}
	return p
}

func TestDeb(t *testing.T) {
	deb := pkgPath(t, "tollgate_1.2.3~test-1_amd64.deb")
	f, err := os.Open(deb)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	members := map[string][]byte{}
	r := ar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(r)
		members[strings.TrimSuffix(h.Name, "/")] = data
	}
	if string(members["debian-binary"]) != "2.0\n" {
		t.Fatalf("ar members: %v", len(members))
	}
	untar := func(name string) map[string]*tarEntry {
		gz, err := gzip.NewReader(bytes.NewReader(members[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return readTar(t, gz)
	}
	control := untar("control.tar.gz")
	fields := map[string]string{}
	for _, line := range strings.Split(string(control["/control"].data), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			fields[k] = v
		}
	}
	if fields["Package"] != "tollgate" || fields["Version"] != "1.2.3~test-1" || fields["Architecture"] != "amd64" || fields["Section"] != "net" {
		t.Errorf("control: %v", fields)
	}
	conffiles := strings.Fields(string(control["/conffiles"].data))
	scripts := map[string]string{}
	for deb, ours := range map[string]string{"preinst": "preinstall.sh", "postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh"} {
		e := control["/"+deb]
		if e == nil || e.hdr.Mode&0o111 == 0 || sum(e.data) != sum(readFile(t, filepath.Join("..", "files", ours))) {
			t.Errorf("%s: missing, not executable, or not files/%s", deb, ours)
			continue
		}
		scripts[deb] = string(e.data)
	}
	checkScripts(t, scripts["preinst"], scripts["postinst"])

	got := map[string]pkgFile{}
	for name, e := range untar("data.tar.gz") {
		got[name] = pkgFile{mode: fs.FileMode(e.hdr.Mode).Perm(), dir: e.hdr.Typeflag == tar.TypeDir, data: e.data, config: contains(conffiles, name)}
		if e.hdr.Uname != "root" && e.hdr.Uid != 0 {
			t.Errorf("%s owned by %s/%d", name, e.hdr.Uname, e.hdr.Uid)
		}
	}
	checkContents(t, got)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestRPM(t *testing.T) {
	path := pkgPath(t, "tollgate-1.2.3~test-1.x86_64.rpm")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rpm, err := rpmutils.ReadRpm(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	nevra, err := rpm.Header.GetNEVRA()
	if err != nil || nevra.Name != "tollgate" || nevra.Version != "1.2.3~test" || nevra.Release != "1" || nevra.Arch != "x86_64" {
		t.Errorf("NEVRA %+v %v", nevra, err)
	}
	script := func(tag int, file string) string {
		s, err := rpm.Header.GetString(tag)
		if err != nil || strings.TrimSpace(s) != strings.TrimSpace(string(readFile(t, filepath.Join("..", "files", file)))) {
			t.Errorf("scriptlet %d: %v, not files/%s", tag, err, file)
		}
		return s
	}
	checkScripts(t, script(rpmutils.PREIN, "preinstall.sh"), script(rpmutils.POSTIN, "postinstall.sh"))
	script(rpmutils.PREUN, "preremove.sh")
	script(rpmutils.POSTUN, "postremove.sh")

	infos, err := rpm.Header.GetFiles()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pkgFile{}
	for _, fi := range infos {
		if fi.UserName() != "root" {
			t.Errorf("%s owned by %s", fi.Name(), fi.UserName())
		}
		got[fi.Name()] = pkgFile{
			mode:   fs.FileMode(fi.Mode()).Perm(),
			dir:    fi.Mode()&0o170000 == 0o040000,
			config: fi.Flags()&rpmutils.RPMFILE_CONFIG != 0 && fi.Flags()&rpmutils.RPMFILE_NOREPLACE != 0,
		}
	}
	pr, err := rpm.PayloadReaderExtended()
	if err != nil {
		t.Fatal(err)
	}
	for {
		fi, err := pr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(pr)
		if err != nil {
			t.Fatal(err)
		}
		e := got[fi.Name()]
		e.data = data
		got[fi.Name()] = e
	}
	checkContents(t, got)
}

// checkScripts: the maintainer scripts are valid sh and make the
// service's user.
func checkScripts(t *testing.T, pre, post string) {
	t.Helper()
	if !strings.Contains(pre, "useradd --system --gid tollgate") || !strings.Contains(post, "install -d -o tollgate -g tollgate -m 0700 /var/lib/tollgate") {
		t.Errorf("scripts do not set up the tollgate user:\n%s\n%s", pre, post)
	}
	// An upgrade hands over to the new binary (systemctl reload) when the
	// running version can; cmd/tollgate's tests tie the status text.
	if !strings.Contains(post, "systemctl reload tollgate.service") || !strings.Contains(post, "systemctl try-restart tollgate.service") {
		t.Errorf("postinstall does not reload (or, for an older running version, restart) on upgrade:\n%s", post)
	}
	for _, s := range []string{pre, post} {
		cmd := exec.Command("sh", "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sh -n: %v\n%s", err, out)
		}
	}
}

// checkContents: what both packages hold, with their modes.
func checkContents(t *testing.T, got map[string]pkgFile) {
	t.Helper()
	bin, comp := binPath(t), filepath.Join(built(t), "completions")
	want := map[string]struct {
		mode   fs.FileMode
		dir    bool
		src    string
		config bool
	}{
		"/usr/bin/tollgate":                                  {mode: 0o755, src: bin},
		"/usr/lib/systemd/system/tollgate.service":           {mode: 0o644, src: "../files/tollgate.service"},
		"/etc/tollgate/tollgate.yaml":                        {mode: 0o640, src: "../files/tollgate.yaml", config: true},
		"/etc/tollgate":                                      {mode: 0o755, dir: true},
		"/var/lib/tollgate":                                  {mode: 0o700, dir: true},
		"/usr/share/bash-completion/completions/tollgate":    {mode: 0o644, src: filepath.Join(comp, "tollgate.bash")},
		"/usr/share/zsh/vendor-completions/_tollgate":        {mode: 0o644, src: filepath.Join(comp, "_tollgate")},
		"/usr/share/fish/vendor_completions.d/tollgate.fish": {mode: 0o644, src: filepath.Join(comp, "tollgate.fish")},
		"/usr/share/doc/tollgate/README.md":                  {mode: 0o644, src: "../../README.md"},
		"/usr/share/doc/tollgate/config.md":                  {mode: 0o644, src: "../../docs/config.md"},
		"/usr/share/doc/tollgate/deploying.md":               {mode: 0o644, src: "../../docs/deploying.md"},
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s missing", name)
		case g.mode != w.mode || g.dir != w.dir || g.config != w.config:
			t.Errorf("%s: mode %o dir %v config %v, want %o %v %v", name, g.mode, g.dir, g.config, w.mode, w.dir, w.config)
		case w.src != "" && sum(g.data) != sum(readFile(t, w.src)):
			t.Errorf("%s differs from %s", name, w.src)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok && !g.dir {
			t.Errorf("unexpected file %s", name)
		}
	}
	checkUnit(t, string(got["/usr/lib/systemd/system/tollgate.service"].data), got)
}

// unit parses a systemd unit: section → key → values (keys may repeat).
func unit(s string) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	sec := ""
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			sec = strings.Trim(line, "[]")
			out[sec] = map[string][]string{}
		default:
			k, v, _ := strings.Cut(line, "=")
			out[sec][k] = append(out[sec][k], v)
		}
	}
	return out
}

// checkUnit: the hardened unit runs the packaged binary on the packaged
// config as its own user, is told when it is ready (and who its main
// process is after a handover), reloads with SIGHUP, may write only
// data_dir, and may open enough files for max.connections.
func checkUnit(t *testing.T, text string, pkg map[string]pkgFile) {
	t.Helper()
	u := unit(text)
	s := u["Service"]
	one := func(k string) string {
		if len(s[k]) != 1 {
			t.Errorf("[Service] %s: %q", k, s[k])
			return ""
		}
		return s[k][0]
	}
	for k, v := range map[string]string{
		"User": "tollgate", "Group": "tollgate", "Restart": "on-failure", "NoNewPrivileges": "yes",
		"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
		"ExecReload": "/bin/kill -HUP $MAINPID", "CapabilityBoundingSet": "", "StateDirectory": "tollgate",
		// READY=1 from tollgate serve; MAINPID= from the new process of a
		// handover (sd_notify, cmd/tollgate/notify.go).
		"Type": "notify", "NotifyAccess": "all",
	} {
		if got := one(k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}
	if u["Install"]["WantedBy"][0] != "multi-user.target" {
		t.Errorf("[Install] %v", u["Install"])
	}
	exec := strings.Fields(one("ExecStart"))
	if len(exec) != 4 || exec[1] != "serve" || exec[2] != "--config" {
		t.Fatalf("ExecStart %q", exec)
	}
	bin, cfgPath := exec[0], exec[3]
	if _, ok := pkg[bin]; !ok {
		t.Errorf("ExecStart runs %s, which the package does not install", bin)
	}
	cfgFile, ok := pkg[cfgPath]
	if !ok || !cfgFile.config {
		t.Fatalf("ExecStart's config %s is not the package's config file", cfgPath)
	}
	if pre := strings.Fields(one("ExecStartPre")); strings.Join(pre, " ") != bin+" validate "+cfgPath {
		t.Errorf("ExecStartPre %q", pre)
	}
	cfg, err := app.Parse(cfgPath, bytes.NewReader(cfgFile.data))
	if err != nil {
		t.Fatalf("the packaged config does not load: %v", err)
	}
	if rw := one("ReadWritePaths"); rw != cfg.DataDir || "/var/lib/"+one("StateDirectory") != cfg.DataDir || one("WorkingDirectory") != cfg.DataDir {
		t.Errorf("ReadWritePaths %q, StateDirectory, WorkingDirectory: the config's data_dir is %q", rw, cfg.DataDir)
	}
	// LimitNOFILE covers the packaged max.connections on a large cluster.
	settings := admission.DefaultSettings()
	for _, l := range cfg.Listeners {
		settings.Listeners = append(settings.Listeners, admission.ListenerSettings{Name: l.Name, Exempt: l.Exempt})
	}
	for k, v := range cfg.BrokerConfigs {
		if err := settings.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	conns, bounded := doctor.MaxConnections(settings)
	if !bounded {
		t.Fatal("the packaged config leaves max.connections unbounded")
	}
	const brokers = 200
	need := doctor.RequiredOpenFiles(conns, brokers, len(cfg.Listeners)*(1+brokers)+1)
	if limit, err := strconv.ParseUint(one("LimitNOFILE"), 10, 64); err != nil || limit < need {
		t.Errorf("LimitNOFILE=%s, need %d for max.connections %d and %d brokers", one("LimitNOFILE"), need, conns, brokers)
	}
	// The service's own command validates the packaged config.
	if hostIsLinuxAMD64() {
		bin := binPath(t)
		p := filepath.Join(t.TempDir(), "tollgate.yaml")
		os.WriteFile(p, cfgFile.data, 0o600)
		if out, err := execCommand(bin, "validate", p); err != nil {
			t.Errorf("tollgate validate on the packaged config: %v\n%s", err, out)
		}
	}
}

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// SHA256SUMS lists every artifact with its digest, and a second build of
// the same commit gives the same bytes.
func TestChecksumsAndReproducibility(t *testing.T) {
	dir := built(t)
	t.Logf("go run ./packaging/build -targets linux/amd64 took %s", dist.took.Round(time.Millisecond))
	sums := string(readFile(t, filepath.Join(dir, "SHA256SUMS")))
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sums), "\n") {
		digest, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		got := sha256.Sum256(readFile(t, filepath.Join(dir, name)))
		if hex.EncodeToString(got[:]) != digest {
			t.Errorf("%s: digest differs from SHA256SUMS", name)
		}
		listed[name] = true
	}
	for _, name := range []string{
		"tollgate_1.2.3-test_linux_amd64.tar.gz", "tollgate_1.2.3~test-1_amd64.deb",
		"tollgate-1.2.3~test-1.x86_64.rpm", "tollgate_1.2.3-test_image_linux_amd64.tar",
	} {
		if !listed[name] {
			t.Errorf("%s not in SHA256SUMS:\n%s", name, sums)
		}
	}
	if again := string(readFile(t, filepath.Join(dist.dir2, "SHA256SUMS"))); again != sums {
		t.Errorf("a second build differs:\n%s\nthen\n%s", sums, again)
	}
}

// The archive holds the binary with what a manual install needs.
func TestArchive(t *testing.T) {
	f, err := os.Open(filepath.Join(built(t), "tollgate_1.2.3-test_linux_amd64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, gz)
	top := "/tollgate_1.2.3-test_linux_amd64/"
	for name, src := range map[string]string{
		"tollgate":                  binPath(t),
		"completions/tollgate.bash": filepath.Join(built(t), "completions", "tollgate.bash"),
		"systemd/tollgate.service":  "../files/tollgate.service",
		"config/tollgate.yaml":      "../files/tollgate.yaml",
		"README.md":                 "../../README.md",
	} {
		e := files[top+name]
		if e == nil || sum(e.data) != sum(readFile(t, src)) {
			t.Errorf("%s missing or not %s", name, src)
		}
	}
	if e := files[top+"tollgate"]; e == nil || e.hdr.Mode != 0o755 {
		t.Errorf("binary mode: %+v", e)
	}
}
