package auth

import (
	"os/exec"
	"strings"
	"testing"
)

// auth sits below the data path: of the project it imports only principal
// (docs/design.md; internal/app's TestImportRule checks the forbidden list).
func TestImportsOnlyPrincipal(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/tollgate/tollgate/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, mod) && dep != mod+"internal/principal" && dep != mod+"internal/auth" {
			t.Errorf("auth depends on %s", dep)
		}
	}
}
