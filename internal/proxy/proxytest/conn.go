// Package proxytest helps test filters outside a running gateway: a Conn
// with fixed answers, and helpers to run a request or a response through
// one filter the way a session does.
package proxytest

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// Conn is a proxy.Conn with fixed answers. Ports maps node ids to this
// listener's broker ports (Host is the advertised host); Mapper opens
// nothing: a node without a port is left out of rewritten responses.
type Conn struct {
	ConnInfo principal.ConnInfo
	Config   proxy.ListenerConfig
	// Unauthenticated is true before a SASL login completes.
	Unauthenticated bool
	// Upstream is true once the session would have dialed its broker.
	Upstream bool
	Cluster  string
	Host     string
	Ports    map[int32]int32
	// Learned records the upstream addresses Mapper was told about.
	Learned map[int32]string
}

var _ proxy.Conn = (*Conn)(nil)

// Info implements proxy.Conn.
func (c *Conn) Info() *principal.ConnInfo { return &c.ConnInfo }

// Authenticated implements proxy.Conn.
func (c *Conn) Authenticated() bool { return !c.Unauthenticated }

// Listener implements proxy.Conn.
func (c *Conn) Listener() *proxy.ListenerConfig { return &c.Config }

// Mapper implements proxy.Conn.
func (c *Conn) Mapper() wire.Mapper { return mapper{c} }

// BrokerAddress implements proxy.Conn.
func (c *Conn) BrokerAddress(id int32) (string, int32, bool) {
	p, ok := c.Ports[id]
	return c.Host, p, ok
}

// Dialed implements proxy.Conn.
func (c *Conn) Dialed() bool { return c.Upstream }

// ClusterID implements proxy.Conn.
func (c *Conn) ClusterID() (string, bool) { return c.Cluster, c.Cluster != "" }

type mapper struct{ c *Conn }

func (m mapper) Advertise(id int32, host string, port int32) (string, int32, bool) {
	if m.c.Learned == nil {
		m.c.Learned = map[int32]string{}
	}
	m.c.Learned[id] = net.JoinHostPort(host, strconv.Itoa(int(port)))
	p, ok := m.c.Ports[id]
	return m.c.Host, p, ok
}

// Request frames req as a client would (client id "test", correlation id
// corr) and returns the proxy.Request a session would pass to filters.
func Request(req kmsg.Request, corr int32) (*proxy.Request, error) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	frame := f.AppendRequest(nil, req, corr)[4:]
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, err
	}
	r := &proxy.Request{
		Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID, ClientID: string(h.ClientID),
		Size: len(frame), Payload: frame, BodyOffset: h.BodyOffset, Flexible: h.API.Flexible(h.Version),
	}
	if h.Key == int16(kmsg.Produce) {
		if r.Acks, err = wire.ProduceAcks(frame, h); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Response frames resp as the broker would answer r.
func Response(r *proxy.Request, resp kmsg.Response) *proxy.Response {
	resp.SetVersion(r.Version)
	return &proxy.Response{Req: r, Buf: wire.EncodeResponse(r.CorrelationID, r.Flexible, resp)}
}

// Decode decodes the response frame in r.
func Decode(r *proxy.Response) (kmsg.Response, bool) { return r.Decode() }
