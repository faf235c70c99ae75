package accept

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The acceptor helper can be alive and still not accept: stopped (SIGSTOP,
// a debugger), starved of CPU at nice 19 by a runaway process, wedged. Its
// death is noticed at once (its pairs read EOF); this is not. So a
// watchdog looks at each port the helper serves: when the gateway is
// waiting for the helper's sockets — not in one of Kafka's admission waits,
// which fill the backlog on purpose — and connections have waited in the
// kernel's accept queue for stallAfter, the helper is stalled. It is
// killed, and every port accepts in the gateway from then on (as after its
// death): connections are late by stallAfter at most, never lost.

const (
	stallCheck = 500 * time.Millisecond
	stallAfter = 3 * time.Second
)

// stallWatch is the watchdog's view of the helper's ports.
type stallWatch struct {
	mu    sync.Mutex
	ports map[*rawListener]time.Time // port -> since when its queue is non-empty (zero: empty)
	once  sync.Once
}

func (s *Server) watch(rl *rawListener) {
	s.stall.mu.Lock()
	if s.stall.ports == nil {
		s.stall.ports = map[*rawListener]time.Time{}
	}
	s.stall.ports[rl] = time.Time{}
	s.stall.mu.Unlock()
	s.stall.once.Do(func() {
		s.wg.Add(1)
		go s.watchdog()
	})
}

func (s *Server) unwatch(rl *rawListener) {
	s.stall.mu.Lock()
	delete(s.stall.ports, rl)
	s.stall.mu.Unlock()
}

func (s *Server) watchdog() {
	defer s.wg.Done()
	t := time.NewTicker(stallCheck)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case now := <-t.C:
			if s.acceptor == nil || !s.acceptor.running() {
				return
			}
			if rl, waited := s.stalled(now); rl != nil {
				s.stalls.Add(1)
				s.log.Error("acceptor helper stalled: connections wait in a port's backlog and it passes none; accepting in the gateway",
					"addr", rl.Addr().String(), "waited", waited.Round(time.Millisecond))
				s.acceptor.kill()
				return
			}
		}
	}
}

// stalled returns a port whose backlog has held connections for
// stallAfter while the gateway waited for the helper.
func (s *Server) stalled(now time.Time) (*rawListener, time.Duration) {
	s.stall.mu.Lock()
	defer s.stall.mu.Unlock()
	for rl, since := range s.stall.ports {
		if !rl.waitingHelper.Load() || acceptQueue(rl.fd) == 0 {
			s.stall.ports[rl] = time.Time{}
			continue
		}
		if since.IsZero() {
			s.stall.ports[rl] = now
			continue
		}
		if d := now.Sub(since); d >= stallAfter {
			return rl, d
		}
	}
	return nil, 0
}

// acceptQueue is how many connections wait in a listening socket's accept
// queue (TCP_INFO's unacked on a listener, as ss shows it).
func acceptQueue(fd int) uint32 {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0
	}
	return ti.Unacked
}
