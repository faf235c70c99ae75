package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test in this package must leave no goroutine behind: gateway
// sessions, accept loops, the metadata refresher and the embedded cluster
// all stop with the app.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
