package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/wire"
)

// The upstream dialer: a session's own connection to the broker its port
// stands for, opened at its first forwarded request, wrapped in TLS and
// logged in as the gateway's service identity when the configuration asks.

// WithCredentials sets where terminated SASL logins are checked.
func WithCredentials(c auth.CredentialLookup) Option {
	return func(g *Gateway) { g.creds = c }
}

// WithUpstreamTLS makes every upstream connection use TLS.
func WithUpstreamTLS(c *tls.Config) Option {
	return func(g *Gateway) { g.upTLS = c }
}

// WithUpstreamSASL authenticates every upstream connection of a
// non-passthrough listener (and the gateway's own metadata client) as one
// service identity.
func WithUpstreamSASL(m sasl.Mechanism) Option {
	return func(g *Gateway) { g.upSASL = m }
}

// dialUpstream opens the session's upstream connection when the first
// request must be forwarded, not when the client connects: a connection
// that never gets that far — refused, failing its TLS or SASL login,
// answered locally — costs the cluster nothing. It then starts the
// responder. Reader goroutine only.
func (s *session) dialUpstream() (Reason, error) {
	addrs := s.gw.upstreamFor(s.info.NodeID)
	if len(addrs) == 0 {
		return ReasonUpstreamDial, fmt.Errorf("no upstream address known for node %d", s.info.NodeID)
	}
	ctx, cancel := s.dialContext()
	defer cancel()
	var up net.Conn
	var errs []error
	for _, addr := range addrs {
		c, err := s.gw.dialFn(ctx, "tcp", addr)
		if err == nil {
			if c, err = s.upstreamAuth(ctx, c, addr); err == nil {
				up = c
				break
			}
		}
		errs = append(errs, fmt.Errorf("dial %s: %w", addr, err))
	}
	if up == nil {
		return ReasonUpstreamDial, errors.Join(errs...)
	}
	s.upMu.Lock()
	if s.upClosed {
		s.upMu.Unlock()
		up.Close()
		return ReasonShutdown, net.ErrClosed
	}
	s.upstream = up
	s.upMu.Unlock()
	s.mu.Lock()
	if s.replay != nil {
		// The client's own request goes first (its answer refreshes the
		// cache and is dropped), ahead of the request that made us dial.
		if h, err := wire.ParseRequestHeader(s.replay[4:]); err == nil {
			s.queue = slices.Insert(s.queue, s.head, pending{silent: true,
				req: Request{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID,
					Size: len(s.replay) - 4, Flexible: h.API.Flexible(h.Version)},
				deadline: time.Now().Add(s.gw.cfg.RequestTimeout)})
		} else {
			s.replay = nil // cannot be: it was parsed once already
		}
	}
	s.upstreamDeadline()
	s.mu.Unlock()
	if s.replay != nil {
		_, err := up.Write(s.replay)
		s.replay = nil
		if err != nil {
			return ReasonUpstreamClosed, fmt.Errorf("write upstream: %w", err)
		}
	}
	s.ur = newConnReader(up)
	s.gw.hooks.upstreamOpened(&s.info)
	s.respDone = make(chan struct{})
	go func() {
		defer close(s.respDone)
		s.respond()
	}()
	return "", nil
}

// maxSASLFrame bounds each frame read during the gateway's own SASL
// exchange with a broker: Kafka's sasl.server.max.receive.size (512 KiB).
const maxSASLFrame = 512 << 10

// upstreamAuth wraps a fresh upstream connection in TLS and authenticates
// it as the service identity when the listener terminates SASL.
func (s *session) upstreamAuth(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	g := s.gw
	if g.upTLS != nil {
		cfg := g.upTLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("upstream TLS: %w", err)
		}
		c = tc
	}
	if g.upSASL == nil || (s.ln.cfg.UsesSASL() && s.ln.cfg.SASLMode() == SASLPassthrough) {
		return c, nil
	}
	if err := saslClient(ctx, c, addr, g.upSASL); err != nil {
		return nil, fmt.Errorf("upstream SASL as the service identity: %w", err)
	}
	return c, nil
}

// saslClient runs a client-side SASL exchange (SaslHandshake v1, then
// SaslAuthenticate) on a fresh connection.
func saslClient(ctx context.Context, c net.Conn, addr string, m sasl.Mechanism) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("tollgate"))
	corr := int32(0)
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		// The broker's answers are read through the bounded frame
		// reader: a SASL exchange is small, whatever a peer claims.
		buf, err := wire.ReadFrame(c, maxSASLFrame)
		if err != nil {
			return err
		}
		// A copy: the decoded response aliases its bytes, and the SASL
		// mechanism reads them after this returns.
		body := bytes.Clone(buf.B[4:])
		buf.Release()
		off := 4
		if req.IsFlexible() {
			off++ // the response header's empty tag section
		}
		if len(body) < off {
			return wire.ErrShortFrame
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(body[off:])
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, m.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w (mechanisms %v)", m.Name(), err, hsResp.SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(addr)
	sess, msg, err := m.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			m := ""
			if resp.ErrorMessage != nil {
				m = *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate: %w: %s", err, m)
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}
