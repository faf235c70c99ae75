// Command build makes every release artifact of Tollgate into dist/:
//
//	go run ./packaging/build [-out dist] [-targets linux/amd64,...]
//
// static binaries (CGO_ENABLED=0) and their .tar.gz for each target, shell
// completions, the OCI image (one multi-platform OCI layout, plus a `docker
// load` tarball per architecture) and .deb and .rpm packages for each linux
// target, and SHA256SUMS. No Docker daemon, nfpm binary or rpmbuild is
// needed: go-containerregistry and nfpm are used as libraries. Run it from
// the repository root (scripts/package.sh does).
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tollgate/tollgate/packaging"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "dist", "output `directory` (emptied first)")
	targets := flag.String("targets", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "comma-separated `os/arch` list of binaries; linux ones also get the image and packages")
	version := flag.String("version", "", "version to stamp (default: the tag on HEAD, else 0.1.0-dev+<commit>)")
	commit := flag.String("commit", "", "commit to stamp (default: git's HEAD); the build time is the commit's, or SOURCE_DATE_EPOCH")
	ca := flag.String("ca-bundle", packaging.CABundle, "CA certificates to put in the image (\"\": none)")
	flag.Parse()
	start := time.Now()
	ctx := context.Background()
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	b := packaging.Describe(ctx, repo)
	if *version != "" {
		b.Version = *version
	}
	if *commit != "" {
		b.Commit = *commit
	}
	fmt.Printf("tollgate %s (commit %s, %s)\n", b.Version, b.Commit, b.Date())
	dist, err := emptyDir(*out)
	if err != nil {
		return err
	}
	if *ca != "" {
		if _, err := os.Stat(*ca); err != nil {
			fmt.Printf("  no CA bundle at %s: the image will trust no CA (-ca-bundle to give one)\n", *ca)
			*ca = ""
		}
	}
	ts, err := parseTargets(*targets, dist)
	if err != nil {
		return err
	}
	r := &release{ctx: ctx, repo: repo, dist: dist, ca: *ca, b: b, targets: ts}
	if err := r.build(); err != nil {
		return err
	}
	if err := checksums(dist, r.artifacts); err != nil {
		return err
	}
	fmt.Println()
	for _, a := range append(r.artifacts, filepath.Join(dist, "image"), filepath.Join(dist, "SHA256SUMS")) {
		rel, _ := filepath.Rel(repo, a)
		fmt.Printf("  %-64s %s\n", rel, size(a))
	}
	fmt.Printf("\ndone in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// emptyDir makes out an empty directory and returns its absolute path.
func emptyDir(out string) (string, error) {
	dist, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dist); err != nil {
		return "", err
	}
	return dist, os.MkdirAll(dist, 0o755)
}

// target is one os/arch to build, and where its binary goes.
type target struct{ os, arch, bin string }

// parseTargets reads -targets, each binary under dist.
func parseTargets(list, dist string) ([]target, error) {
	var ts []target
	for _, t := range strings.Split(list, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok {
			return nil, fmt.Errorf("-targets: %q is not os/arch", t)
		}
		ts = append(ts, target{goos, goarch, filepath.Join(dist, "bin", goos+"_"+goarch, "tollgate")})
	}
	return ts, nil
}

// release is one build of every artifact into dist.
type release struct {
	ctx        context.Context
	repo, dist string
	ca         string // the image's CA bundle, or ""
	b          packaging.Build
	targets    []target
	artifacts  []string // made so far, to list and sum
}

// build makes the binaries, the completions, the archives, and the image
// and packages of the linux targets.
func (r *release) build() error {
	host, err := r.binaries()
	if err != nil {
		return err
	}
	if host == "" { // completions come from running a binary: build one for here
		host = filepath.Join(r.dist, "bin", "host", "tollgate")
		if err := packaging.Binary(r.ctx, r.repo, runtime.GOOS, runtime.GOARCH, host, r.b); err != nil {
			return err
		}
		defer os.RemoveAll(filepath.Dir(host))
	}
	comp := filepath.Join(r.dist, "completions")
	if err := packaging.Completions(r.ctx, host, comp); err != nil {
		return err
	}
	if err := r.archives(comp); err != nil {
		return err
	}
	return r.images(comp)
}

// step prints how long a step since t0 took.
func step(what string, t0 time.Time) {
	fmt.Printf("  %-44s %s\n", what, time.Since(t0).Round(10*time.Millisecond))
}

// binaries builds every target's binary and returns the one this machine
// runs, if a target is it.
func (r *release) binaries() (host string, err error) {
	for _, t := range r.targets {
		t0 := time.Now()
		if err := packaging.Binary(r.ctx, r.repo, t.os, t.arch, t.bin, r.b); err != nil {
			return "", err
		}
		step("binary "+t.os+"/"+t.arch, t0)
		if t.os == runtime.GOOS && t.arch == runtime.GOARCH {
			host = t.bin
		}
	}
	return host, nil
}

// archives makes each target's .tar.gz: the binary, the README, the
// completions in comp, the systemd unit and the example config.
func (r *release) archives(comp string) error {
	for _, t := range r.targets {
		a := filepath.Join(r.dist, fmt.Sprintf("tollgate_%s_%s_%s.tar.gz", r.b.Version, t.os, t.arch))
		if err := archive(a, r.b.Time, map[string]string{
			"tollgate":                  t.bin,
			"README.md":                 filepath.Join(r.repo, "README.md"),
			"completions/tollgate.bash": filepath.Join(comp, "tollgate.bash"),
			"completions/_tollgate":     filepath.Join(comp, "_tollgate"),
			"completions/tollgate.fish": filepath.Join(comp, "tollgate.fish"),
			"systemd/tollgate.service":  filepath.Join(r.repo, "packaging", "files", "tollgate.service"),
			"config/tollgate.yaml":      filepath.Join(r.repo, "packaging", "files", "tollgate.yaml"),
		}); err != nil {
			return err
		}
		r.artifacts = append(r.artifacts, a)
	}
	return nil
}

// images makes each linux target's image, .deb and .rpm, then the one
// image layout and the per-architecture tarballs.
func (r *release) images(comp string) error {
	images := map[string]v1.Image{}
	for _, t := range r.targets {
		if t.os != "linux" {
			continue
		}
		t0 := time.Now()
		img, err := packaging.Image(t.bin, t.arch, filepath.Join(r.repo, "packaging", "files"), r.ca, r.b)
		if err != nil {
			return fmt.Errorf("image %s: %w", t.arch, err)
		}
		images[t.arch] = img
		for _, format := range []string{"deb", "rpm"} {
			p, err := packaging.Package(format, packaging.PackageInput{
				Dir: filepath.Join(r.repo, "packaging"), Repo: r.repo, Binary: t.bin, Completions: comp, Arch: t.arch,
			}, r.b, r.dist)
			if err != nil {
				return err
			}
			r.artifacts = append(r.artifacts, p)
		}
		step("image and packages linux/"+t.arch, t0)
	}
	if len(images) == 0 {
		return nil
	}
	t0 := time.Now()
	tars, err := packaging.WriteImages(filepath.Join(r.dist, "image"), images, r.b)
	if err != nil {
		return err
	}
	r.artifacts = append(r.artifacts, tars...)
	step("image layout dist/image and tarballs", t0)
	return nil
}

// repoRoot is the directory holding go.mod, from here upwards.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run from the repository")
		}
		dir = parent
	}
}

// archive writes a .tar.gz of files (name in archive → path), under a
// directory named after the archive.
func archive(out string, mtime time.Time, files map[string]string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	top := strings.TrimSuffix(filepath.Base(out), ".tar.gz")
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := os.ReadFile(files[n])
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if n == "tollgate" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: top + "/" + n, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

func checksums(dist string, files []string) error {
	var b strings.Builder
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(p))
	}
	return os.WriteFile(filepath.Join(dist, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func size(p string) string {
	var n int64
	filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
