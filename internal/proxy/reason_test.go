package proxy

import (
	"os"
	"strings"
	"testing"
)

// Every close reason is named in the metrics reference, where
// tollgate_connections_closed_total lists its reason labels.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Reasons {
		if !strings.Contains(string(doc), "`"+string(r)+"`") {
			t.Errorf("close reason %q is not in docs/metrics.md", r)
		}
	}
}
