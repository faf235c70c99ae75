package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at build time by the packaging build (go run ./packaging/build):
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// Empty values fall back to what the Go toolchain stamped into the binary
// (module version from `go install module@version`, vcs.revision and
// vcs.time when built in a checkout with -buildvcs).
var version, commit, date string

// devVersion names a build that carries no version at all.
const devVersion = "0.1.0-dev"

// buildInfo is what `tollgate version` reports.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// currentBuild merges the link-time values with the toolchain's stamp.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return mergeBuild(version, commit, date, bi)
}

func mergeBuild(ver, rev, when string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: ver, Commit: rev, Date: when, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				b.Modified = b.Modified || (rev == "" && s.Value == "true")
			}
		}
	}
	if b.Version == "" {
		b.Version = devVersion
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

func versionFlags(asJSON *bool, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(asJSON, "json", false, "print one JSON object")
	return fs
}

func versionCmd(args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	if err := versionFlags(&asJSON, stderr).Parse(args); err != nil {
		return 2
	}
	b := currentBuild()
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(b); err != nil {
			return 1
		}
		return 0
	}
	modified := ""
	if b.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(stdout, "tollgate %s\ncommit    %s%s\nbuilt     %s\ngo        %s %s\n", b.Version, b.Commit, modified, b.Date, b.Go, b.Platform)
	return 0
}
