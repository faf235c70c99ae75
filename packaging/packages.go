package packaging

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// PackageInput is where the files of a package come from.
type PackageInput struct {
	// Dir is packaging/ (nfpm.yaml, files/); Repo the repository root
	// (README.md, docs/).
	Dir, Repo string
	// Binary is the static linux binary for Arch; Completions the directory
	// Completions wrote.
	Binary, Completions string
	Arch                string
}

// Package builds the format ("deb" or "rpm") package described by
// packaging/nfpm.yaml into outDir and returns its path.
func Package(format string, in PackageInput, b Build, outDir string) (string, error) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	vars := map[string]string{
		"ARCH":        in.Arch,
		"VERSION":     b.Version,
		"BINARY":      abs(in.Binary),
		"FILES":       abs(filepath.Join(in.Dir, "files")),
		"COMPLETIONS": abs(in.Completions),
		"DOCS":        abs(in.Repo),
	}
	var unset []string
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(in.Dir, "nfpm.yaml"), func(k string) string {
		v, ok := vars[k]
		if !ok && !strings.HasPrefix(k, "NFPM_") { // nfpm asks for signing passphrases: none
			unset = append(unset, k)
		}
		return v
	})
	if err == nil && len(unset) > 0 {
		err = fmt.Errorf("uses ${%s}, which the build does not set", strings.Join(unset, "}, ${"))
	}
	if err != nil {
		return "", fmt.Errorf("nfpm.yaml: %w", err)
	}
	info, err := cfg.Get(format)
	if err != nil {
		return "", err
	}
	for _, sp := range []*string{&info.Scripts.PreInstall, &info.Scripts.PostInstall, &info.Scripts.PreRemove, &info.Scripts.PostRemove} {
		if *sp != "" && !filepath.IsAbs(*sp) {
			*sp = abs(filepath.Join(in.Dir, *sp))
		}
	}
	info.MTime = b.Time
	info.Release = "1"
	info.RPM.BuildHost = "tollgate-packaging" // not this machine's name: same commit, same package
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, pkgr.ConventionalFileName(info))
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	if err := pkgr.Package(info, f); err != nil {
		f.Close()
		os.Remove(out)
		return "", fmt.Errorf("%s: %w", format, err)
	}
	return out, f.Close()
}
