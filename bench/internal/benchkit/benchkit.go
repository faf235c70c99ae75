// Package benchkit holds the few helpers the benchmark commands share:
// free loopback ports, waiting for a server, a child process's CPU time
// and percentiles. What it reads from /proc comes from
// internal/testkit/proc, which the end-to-end tests share.
package benchkit

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/testkit/proc"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FreeAddr returns a loopback address with a port free a moment ago.
func FreeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitDial waits up to 20 s for addr to accept connections.
func WaitDial(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not come up", addr)
}

// ProcCPU returns the user+system CPU time of process pid from /proc (10 ms
// resolution), 0 if it cannot be read.
func ProcCPU(pid int) time.Duration { return proc.CPU(pid) }

// ChildPIDs returns the processes whose parent is pid (Tollgate's acceptor
// helper, for one).
func ChildPIDs(pid int) []int {
	kids, _ := proc.Children(pid)
	out := make([]int, len(kids))
	for i, k := range kids {
		out[i] = k.PID
	}
	return out
}

// ProduceN produces n records of value val through cl, all in flight at
// once as the client allows, and returns the last error any of them had.
func ProduceN(ctx context.Context, cl *kgo.Client, n int, val []byte) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last error
	for range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				last = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return last
}

// Pct returns the p-quantile (0..1) of ds, nearest rank below.
func Pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

// DialHello connects to addr from src (any address when "") and does one
// ApiVersions v3 round trip, a client's first request, naming software and
// clientID; the connection is then idle, with no deadline.
func DialHello(addr, src, software, clientID string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, software, "1.0"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(f.AppendRequest(nil, req, 1)); err != nil {
		c.Close()
		return nil, err
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(sz[:]))); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}
