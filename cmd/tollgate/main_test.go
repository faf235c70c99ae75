package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// buildBinary builds tollgate once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tollgate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The README's run command: serve starts the embedded cluster, prints the
// bootstrap address, carries traffic, and exits cleanly on SIGTERM.
func TestServeAndSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfg, []byte(`
data_dir: `+filepath.Join(t.TempDir(), "data")+`
listeners:
  - name: PLAINTEXT
    bootstrap: 127.0.0.1:0
http:
  address: 127.0.0.1:0
log:
  format: json
`), 0o600)
	cmd := exec.Command(bin, "serve", "--config", cfg)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`Bootstrap servers: (\S+)`)
	var bootstrap string
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			bootstrap = m[1]
			break
		}
	}
	if bootstrap == "" {
		t.Fatalf("no bootstrap address printed; stderr:\n%s", stderr.String())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("smoke"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce through the binary: %v", err)
	}
	cl.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("tollgate did not exit within 15s of SIGTERM")
	}
	if !strings.Contains(stderr.String(), `"msg":"connection open"`) {
		t.Errorf("expected JSON connection log lines; got:\n%s", stderr.String())
	}
}

// startServe runs the binary with cfg and returns the bootstrap address.
func startServe(t *testing.T, bin, cfg string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", cfg)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`Bootstrap servers: (\S+)`)
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			go func() {
				for lines.Scan() {
				}
			}()
			return cmd, m[1]
		}
	}
	t.Fatal("tollgate printed no bootstrap address")
	return nil, ""
}

// An acknowledged AlterClientQuotas survives kill -9 of the gateway.
func TestQuotaChangeSurvivesKill9(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tollgate.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+`
listeners:
  - name: PLAINTEXT
    bootstrap: 127.0.0.1:0
http:
  address: ""
authorization:
  quota_admins: [ANONYMOUS]
`), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "durable-user"
	entity := []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &name}}

	cmd, boot := startServe(t, bin, cfg)
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 123456}},
	}})
	cl.Close()
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	// Acknowledged: now kill -9, no chance to flush anything.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, boot = startServe(t, bin, cfg)
	cl, err = kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	desc, err := kadm.NewClient(cl).DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &name}})
	if err != nil || len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Value != 123456 {
		t.Fatalf("after kill -9 and restart: %v %+v", err, desc)
	}
}

func TestValidateAndVersion(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listeners:\n  - name: PLAINTEXT\n    bootstrap: 0.0.0.0:9092\n    broker_port_base: 9100\nupstream:\n  bootstrap: [kafka-1:9092]\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listeners:\n  - name: PLAINTEXT\n    bootstrap: 127.0.0.1:9092\n    bootstarp_typo: 1\n"), 0o600)
	invalid := filepath.Join(dir, "invalid.yaml")
	os.WriteFile(invalid, []byte("listeners:\n  - name: PLAINTEXT\n    bootstrap: nonsense\n"), 0o600)

	var out, errb strings.Builder
	if code := run([]string{"validate", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), "ok") {
		t.Fatalf("validate good: code %d, out %q, err %q", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := run([]string{"validate", bad}, &out, &errb); code != 1 {
		t.Fatalf("validate bad: code %d", code)
	}
	if want := bad + ":4: field bootstarp_typo not found"; !strings.Contains(errb.String(), want) {
		t.Fatalf("validate bad said %q, want it to contain %q", errb.String(), want)
	}
	errb.Reset()
	if code := run([]string{"validate", invalid}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bootstrap \"nonsense\"") {
		t.Fatalf("validate invalid: code %d, err %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "tollgate ") {
		t.Fatalf("version: code %d, out %q", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"bogus"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown command: code %d, err %q", code, errb.String())
	}
}
