package proxy

import (
	"github.com/tollgate/tollgate/internal/principal"
)

// UpstreamObserver is optionally implemented by an Observer that counts
// the upstream connections the gateway opens (one per client connection
// that forwards a request; none for one that never does).
type UpstreamObserver interface {
	UpstreamOpened(c *principal.ConnInfo)
}

// shedLoop closes the least recently used connections when the gateway is
// over max.connections (after the limit was lowered, or while an exempt
// listener took more than its share).
func (g *Gateway) shedLoop() {
	defer g.wg.Done()
	var ids []uint64
	for {
		select {
		case <-g.closing:
			return
		case <-g.admit.ShedSignal():
		}
		ids = g.admit.Shed(ids[:0])
		if len(ids) == 0 {
			continue
		}
		want := make(map[uint64]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		g.mu.Lock()
		for s := range g.sessions {
			if want[s.info.ID] {
				go s.close(ReasonShed, nil)
			}
		}
		g.mu.Unlock()
	}
}
