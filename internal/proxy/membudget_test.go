package proxy_test

import (
	"encoding/binary"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// Connections that each send most of a large frame and stop hold no more
// than socket.queued_max_request_bytes together: the third 500 KiB frame
// waits for room, reading nothing, while a client with ordinary requests
// is served; when one of the first two goes, the waiting one is read.
// Before the budget the three held 1.5 MiB.
func TestRequestMemoryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const frame = 500 << 10
		rg := newRigConfig(t, proxy.Config{MaxRequestSize: 512 << 10, QueuedMaxRequestBytes: 1 << 20}, describeGroupsAnswer(0))
		var attackers []*client
		for range 3 {
			c := rg.dial(t)
			var sz [4]byte
			binary.BigEndian.PutUint32(sz[:], frame)
			go func() {
				c.c.Write(sz[:])
				body := make([]byte, frame*9/10) // 90 %, never the rest
				binary.BigEndian.PutUint16(body, uint16(kmsg.Metadata))
				c.c.Write(body)
			}()
			attackers = append(attackers, c)
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		inUse, budget, waits := rg.gw.RequestMemory()
		if inUse > budget || inUse != 2*(frame+4) || waits != 1 {
			t.Fatalf("in use %d of %d with %d waits, want the two first frames held and the third waiting", inUse, budget, waits)
		}
		good := rg.dial(t)
		if resp := good.roundTrip(describeGroups("g")); len(groupsOf(resp)) != 1 {
			t.Fatalf("the ordinary client: %v", groupsOf(resp))
		}
		attackers[0].c.Close()
		synctest.Wait()
		if inUse, _, _ := rg.gw.RequestMemory(); inUse != 2*(frame+4) {
			t.Fatalf("after one attacker left: %d in use, want the waiting frame taken in its place", inUse)
		}
		for _, c := range attackers[1:] {
			c.c.Close()
		}
		synctest.Wait()
		if inUse, _, _ := rg.gw.RequestMemory(); inUse != 0 {
			t.Fatalf("%d bytes in use with every attacker gone", inUse)
		}
	})
}
