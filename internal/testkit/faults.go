package testkit

import (
	"context"
	"errors"
	"net"
	"sync"
)

// FaultDialer is the gateway's upstream dialer in tests: it can make an
// upstream address unreachable and sever every connection to it, which is
// what a broker crash looks like from the gateway.
type FaultDialer struct {
	mu    sync.Mutex
	down  map[string]bool
	conns map[string][]net.Conn
	d     net.Dialer
}

// DialContext dials addr unless it is down.
func (f *FaultDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	down := f.down[addr]
	f.mu.Unlock()
	if down {
		return nil, errors.New("connection refused (fault injected)")
	}
	c, err := f.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.conns == nil {
		f.conns = map[string][]net.Conn{}
	}
	f.conns[addr] = append(f.conns[addr], c)
	f.mu.Unlock()
	return c, nil
}

// Kill makes addr unreachable and closes every connection to it. It
// returns how many connections it closed.
func (f *FaultDialer) Kill(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[string]bool{}
	}
	f.down[addr] = true
	n := len(f.conns[addr])
	for _, c := range f.conns[addr] {
		c.Close()
	}
	delete(f.conns, addr)
	return n
}

// Revive makes addr reachable again.
func (f *FaultDialer) Revive(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.down, addr)
}
