// Package packaging builds Tollgate's release artifacts without a Docker
// daemon or a packaging toolchain: static binaries (CGO_ENABLED=0), an OCI
// image (go-containerregistry) and .deb/.rpm packages (nfpm). The command in
// ./build runs it all (`go run ./packaging/build`); the tests build one
// linux/amd64 binary and inspect the image and packages made from it.
package packaging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Build identifies a build: what `tollgate version` reports, and the time
// every archive entry is stamped with (the commit's, so that the same
// commit gives the same bytes).
type Build struct {
	Version string
	Commit  string
	Time    time.Time
}

// Date is Time as `tollgate version` prints it.
func (b Build) Date() string { return b.Time.UTC().Format(time.RFC3339) }

// Describe reads the build identity of the checkout at repo from git: the
// tag on HEAD (v1.2.3 → 1.2.3), else 0.1.0-dev+<short commit>, with
// ".dirty" when the work tree has changes; the commit time, or
// SOURCE_DATE_EPOCH when set. Without git: 0.1.0-dev, unknown, now.
func Describe(ctx context.Context, repo string) Build {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	b := Build{Version: "0.1.0-dev", Commit: git("rev-parse", "HEAD"), Time: time.Now().UTC().Truncate(time.Second)}
	if b.Commit == "" {
		b.Commit = "unknown"
	} else {
		if tag := git("describe", "--tags", "--exact-match", "--match", "v[0-9]*"); tag != "" {
			b.Version = strings.TrimPrefix(tag, "v")
		} else {
			b.Version += "+" + b.Commit[:12]
		}
		if git("status", "--porcelain", "--untracked-files=no") != "" {
			b.Version += ".dirty"
		}
		if ts, err := strconv.ParseInt(git("log", "-1", "--format=%ct"), 10, 64); err == nil {
			b.Time = time.Unix(ts, 0).UTC()
		}
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if ts, err := strconv.ParseInt(s, 10, 64); err == nil {
			b.Time = time.Unix(ts, 0).UTC()
		}
	}
	return b
}

// LDFlags are the linker flags that stamp b into cmd/tollgate, stripped of
// symbol tables.
func (b Build) LDFlags() string {
	return fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=%s", b.Version, b.Commit, b.Date())
}

// Binary builds a static cmd/tollgate for goos/goarch into out.
func Binary(ctx context.Context, repo, goos, goarch, out string, b Build) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", b.LDFlags(), "-o", out, "./cmd/tollgate")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s/%s: %w\n%s", goos, goarch, err, msg)
	}
	return nil
}

// Completions runs bin (built for this machine) to write the bash, zsh and
// fish completion scripts into dir as tollgate.bash, _tollgate and
// tollgate.fish.
func Completions(ctx context.Context, bin, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for shell, name := range map[string]string{"bash": "tollgate.bash", "zsh": "_tollgate", "fish": "tollgate.fish"} {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "completion", shell)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("tollgate completion %s: %w: %s", shell, err, errb.String())
		}
		if err := os.WriteFile(filepath.Join(dir, name), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
