package app

import (
	"os/exec"
	"strings"
	"testing"
)

// The data path and the pure packages receive configuration as values and
// report through hooks: they must never import the control plane, storage,
// audit, metrics, HTTP or the composition root (docs/design.md).
func TestImportRule(t *testing.T) {
	const mod = "github.com/tollgate/tollgate/internal/"
	low := []string{"wire", "principal", "rate", "quota", "admission", "auth", "proxy", "enforce"}
	high := []string{"control", "store", "audit", "metrics", "httpapi", "app", "cli"}
	for _, p := range low {
		out, err := exec.Command("go", "list", "-deps", "../"+p).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "no Go files") || strings.Contains(string(out), "cannot find") || strings.Contains(string(out), "directory not found") {
				continue // not written yet
			}
			t.Fatalf("go list %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, h := range high {
				if dep == mod+h || strings.HasPrefix(dep, mod+h+"/") {
					t.Errorf("internal/%s imports %s", p, dep)
				}
			}
		}
	}
}
