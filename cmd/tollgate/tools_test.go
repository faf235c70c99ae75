package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate/tollgate/internal/app"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range shells {
		code, out, errs := runCmd(t, "completion", sh)
		if code != 0 || errs != "" {
			t.Fatalf("completion %s: code %d, stderr %q", sh, code, errs)
		}
		// Every command of the table is offered, and flags read both from
		// flag sets (serve, doctor) and from the client commands' usage.
		for _, c := range commands() {
			if !strings.Contains(out, c.name) {
				t.Errorf("%s script lacks command %s", sh, c.name)
			}
		}
		for _, f := range []string{"--config", "--clock-topic", "--entity-type", "--topic", "--admin-url", "--password-stdin"} {
			if !strings.Contains(out, f) && !strings.Contains(out, "-l "+strings.TrimPrefix(f, "--")) {
				t.Errorf("%s script lacks flag %s", sh, f)
			}
		}
		path := filepath.Join(t.TempDir(), "tollgate."+sh)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		check := map[string][]string{"bash": {"bash", "-n"}, "zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}}[sh]
		if _, err := exec.LookPath(check[0]); err != nil {
			if sh == "bash" {
				t.Fatal("bash is required for this test")
			}
			t.Logf("%s not installed: syntax of the %s script not checked", check[0], sh)
			continue
		}
		if b, err := exec.Command(check[0], append(check[1:], path)...).CombinedOutput(); err != nil {
			t.Errorf("%s rejects the script: %v\n%s", check[0], err, b)
		}
	}
	if code, _, errs := runCmd(t, "completion", "tcsh"); code != 2 || !strings.Contains(errs, "bash|zsh|fish") {
		t.Errorf("completion tcsh: code %d, stderr %q", code, errs)
	}
}

// The bash script completes what a user types: it is run, not just parsed.
func TestBashCompletionCompletes(t *testing.T) {
	_, script, _ := runCmd(t, "completion", "bash")
	path := filepath.Join(t.TempDir(), "tollgate.bash")
	os.WriteFile(path, []byte(script), 0o644)
	for _, c := range []struct {
		words string
		want  string
	}{
		{"tollgate pe", "perf"},
		{"tollgate do", "doctor"},
		{"tollgate perf p", "produce"},
		{"tollgate perf produce --to", "--topic"},
		{"tollgate serve --c", "--config"},
		{"tollgate doctor --cl", "--clock-topic"},
		{"tollgate configs --entity-t", "--entity-type"},
		{"tollgate completion f", "fish"},
		{"tollgate quotas apply -", "--dry-run"},
	} {
		words := strings.Fields(c.words)
		if strings.HasSuffix(c.words, " ") {
			words = append(words, "")
		}
		sh := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tollgate; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", sh, "bash", path}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.words, err, out)
		}
		if !strings.Contains("\n"+string(out), "\n"+c.want+"\n") {
			t.Errorf("%q completes to %q, want %s among them", c.words, out, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(out, "tollgate ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: code %d, out %q", code, out)
	}
	code, out, _ = runCmd(t, "version", "--json")
	var b buildInfo
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Go == "" || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("version --json: code %d, out %q", code, out)
	}

	// Link-time values win; the toolchain's stamp fills what they leave.
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got := mergeBuild("", "", "", bi); got.Version != "v1.4.0" || got.Commit != "abc" || got.Date != "2026-01-02T03:04:05Z" || !got.Modified || got.Go != "go1.99" {
		t.Errorf("from build info: %+v", got)
	}
	if got := mergeBuild("v2.0.0", "def", "2027-01-01T00:00:00Z", bi); got.Version != "v2.0.0" || got.Commit != "def" || got.Date != "2027-01-01T00:00:00Z" || got.Modified {
		t.Errorf("ldflags over build info: %+v", got)
	}
	if got := mergeBuild("", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}); got.Version != devVersion || got.Commit != "unknown" {
		t.Errorf("nothing stamped: %+v", got)
	}
}

// The binary built with the packaging build's -ldflags reports them.
func TestVersionLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tollgate")
	ld := "-X main.version=v9.8.7 -X main.commit=0123456789abcdef -X main.date=2026-05-04T03:02:01Z"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var b buildInfo
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b.Version != "v9.8.7" || b.Commit != "0123456789abcdef" || b.Date != "2026-05-04T03:02:01Z" || !strings.HasPrefix(b.Go, "go1.") {
		t.Fatalf("version --json: %+v", b)
	}
}

// health against a real gateway's admin port.
func TestHealth(t *testing.T) {
	dir := t.TempDir()
	cfg, err := app.Parse("test.yaml", strings.NewReader(`
data_dir: `+filepath.Join(dir, "data")+`
listeners:
  - name: PLAINTEXT
    bootstrap: 127.0.0.1:0
http:
  address: 127.0.0.1:0
socket:
  acceptor_process: false
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.Start(ctx, cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	base := "http://" + a.HTTPAddr()
	for ctx.Err() == nil { // readiness follows the first metadata answer
		if code, _, _ := runCmd(t, "health", "--url", base+"/readyz"); code == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out, errs := runCmd(t, "health", "--url", base+"/readyz"); code != 0 || !strings.Contains(out, "200") {
		t.Fatalf("health /readyz: code %d, out %q, err %q", code, out, errs)
	}
	if code, _, errs := runCmd(t, "health", "--url", base+"/no-such-page"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("health on a 404: code %d, err %q", code, errs)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	if code, _, errs := runCmd(t, "health", "--url", "http://"+closed+"/readyz", "--timeout", "2s"); code != 1 || !strings.Contains(errs, "refused") {
		t.Errorf("health on a closed port: code %d, err %q", code, errs)
	}
	for _, bad := range []string{"ftp://x/readyz", "127.0.0.1:9644/readyz", "http:///x"} {
		if code, _, _ := runCmd(t, "health", "--url", bad); code != 2 {
			t.Errorf("health --url %s: code %d, want 2", bad, code)
		}
	}
}

// doctor reads the real config file and says, by its exit status, whether
// it is safe to start.
func TestDoctorCommand(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	write := func(bootstrap string) string {
		p := filepath.Join(dir, "tollgate.yaml")
		os.WriteFile(p, []byte(`
listeners:
  - name: PLAINTEXT
    bootstrap: `+bootstrap+`
upstream:
  bootstrap: [`+strings.Join(c.ListenAddrs(), ", ")+`]
http:
  address: ""
data_dir: `+filepath.Join(dir, "data")+`
broker_configs:
  max.connections: "100"
`), 0o600)
		return p
	}
	cfg := write("127.0.0.1:0")
	code, out, errs := runCmd(t, "doctor", "--config", cfg, "--json", "--clock-topic", "")
	var res struct {
		Safe    bool
		Results []struct{ Check, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Safe {
		t.Fatalf("doctor: code %d, %v, out %s, err %s", code, err, out, errs)
	}
	got := map[string]string{}
	for _, r := range res.Results {
		got[r.Check] = r.Status
	}
	if got["upstream"] != "OK" || got["open files"] != "OK" || got["clock"] != "WARN" || got["data_dir"] != "OK" {
		t.Errorf("results: %v", got)
	}
	// Warnings (the skipped clock check) fail only with --strict.
	if code, _, _ := runCmd(t, "doctor", "--config", cfg, "--clock-topic", "", "--strict"); code != 1 {
		t.Errorf("doctor --strict with a warning: code %d", code)
	}

	cfg = write(held.Addr().String())
	code, out, _ = runCmd(t, "doctor", "--config", cfg, "--clock-topic", "")
	if code != 1 || !strings.Contains(out, "FAIL    ports") || !strings.Contains(out, "is in use") || !strings.Contains(out, "NOT safe to start") {
		t.Errorf("doctor with a busy port: code %d\n%s", code, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listeners: [{name: X, bootstrap: nonsense}]\n"), 0o600)
	if code, _, errs := runCmd(t, "doctor", "--config", bad); code != 1 || !strings.Contains(errs, "does not load") {
		t.Errorf("doctor on an invalid config: code %d, %q", code, errs)
	}
	if code, _, _ := runCmd(t, "doctor", "extra"); code != 2 {
		t.Errorf("doctor with an argument: code %d", code)
	}
}
