package e2e

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
	"go.uber.org/goleak"
)

// Tests that share nothing (each starts its own gateway and cluster on
// free ports) call t.Parallel. A test that bounds wall time, measures a
// real-time rate, or counts this process's children or descriptors stays
// serial and says why: Go runs the serial tests first, one at a time, and
// the parallel ones after them.
//
// Every test in this package must leave no goroutine behind: gateway
// sessions, accept loops, the metadata refresher and the embedded cluster
// all stop with the app. (Idle keep-alive connections of the shared HTTP
// client are closed first: they belong to the test, not to Tollgate.)
func TestMain(m *testing.M) {
	// The acceptor helper tests start this test binary as the gateway's
	// helper process (as tollgate serve starts itself).
	accept.RunAcceptorHelper()
	code := m.Run()
	kafka.StopShared() // the real cluster, if a test started it
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}
