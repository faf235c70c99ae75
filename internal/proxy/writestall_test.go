package proxy_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// bigGroupsAnswer answers a DescribeGroups with one 48 KiB member per
// group: a few answers fill a socket's buffers.
func bigGroupsAnswer(req kmsg.Request) kmsg.Response {
	dg, ok := req.(*kmsg.DescribeGroupsRequest)
	if !ok {
		return nil
	}
	resp := dg.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range dg.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = g
		m := kmsg.NewDescribeGroupsResponseGroupMember()
		m.MemberAssignment = bytes.Repeat([]byte("m"), 48<<10)
		rg.Members = append(rg.Members, m)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// A client that pipelines requests and reads none of the answers is
// closed once a write to it has made no progress for
// socket.connections_max_idle (write_timeout), not held for ever: before
// the fix the responder blocked in Write with no deadline, the reader
// waited for an in-flight slot, and the session stayed.
func TestStalledReaderClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{IdleTimeout: 3 * time.Second, MaxInFlight: 8}, bigGroupsAnswer)
		c := rg.dial(t)
		start := time.Now()
		go func() {
			for {
				if _, err := c.c.Write(c.f.AppendRequest(nil, describeGroups("g"), 1)); err != nil {
					return // closed by the gateway
				}
			}
		}()
		for len(rg.closes.list()) == 0 && time.Since(start) < time.Minute {
			time.Sleep(100 * time.Millisecond)
		}
		took := time.Since(start)
		if got := rg.closes.list(); !slices.Equal(got, []proxy.Reason{proxy.ReasonWriteTimeout}) {
			t.Fatalf("close reasons %v after %v, want one write_timeout", got, took)
		}
		if took < 3*time.Second || took > 4*time.Second {
			t.Errorf("closed after %v, want once a write made no progress for 3s", took)
		}
		c.c.Close()
	})
}

// A slow client that keeps reading is served: each write is given the
// idle time again when some of it went, so answers that take many times
// socket.connections_max_idle to drain arrive whole.
func TestSlowReaderServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{IdleTimeout: 3 * time.Second}, bigGroupsAnswer)
		c := rg.dial(t)
		req := describeGroups("a", "b", "c", "d", "e", "f", "g", "h") // ~400 KiB answer
		corr := c.send(req)
		start := time.Now()
		// 16 KiB every second: about 25 s for the answer.
		var got bytes.Buffer
		chunk := make([]byte, 16<<10)
		var sz int
		for sz == 0 || got.Len() < sz+4 {
			time.Sleep(time.Second)
			n, err := io.ReadFull(c.c, chunk[:min(len(chunk), max(4, sz+4-got.Len()))])
			got.Write(chunk[:n])
			if err != nil {
				t.Fatalf("after %v and %d bytes: %v (closes %v)", time.Since(start), got.Len(), err, rg.closes.list())
			}
			if sz == 0 && got.Len() >= 4 {
				sz = int(binary.BigEndian.Uint32(got.Bytes()))
			}
			// A request now and then: the read side is not idle either.
			if time.Since(start)%(2*time.Second) < time.Second {
				c.send(describeGroups())
			}
		}
		if took := time.Since(start); took < 10*time.Second {
			t.Fatalf("the answer took %v, want a drain many times the idle time", took)
		}
		if corrGot := int32(binary.BigEndian.Uint32(got.Bytes()[4:])); corrGot != corr {
			t.Fatalf("correlation %d, want %d", corrGot, corr)
		}
		if cl := rg.closes.list(); len(cl) != 0 {
			t.Fatalf("closed: %v", cl)
		}
	})
}
