package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
)

// Kafka's security protocols (listener security_protocol).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL modes of a SASL listener.
const (
	// SASLTerminate checks credentials at Tollgate (its own credential
	// store) and talks to upstream with one service identity.
	SASLTerminate = "terminate"
	// SASLPassthrough forwards the exchange to the upstream brokers, which
	// stay the authority; Tollgate reads the user name from the client's
	// first message and binds it once upstream says yes.
	SASLPassthrough = "passthrough"
)

// SASLConfig configures authentication on a SASL listener.
type SASLConfig struct {
	// Mode is terminate (default) or passthrough.
	Mode string `yaml:"mode"`
	// Mechanisms enabled (default PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	Mechanisms []string `yaml:"mechanisms"`
	// FailedAuthenticationDelay is Kafka's
	// connection.failed.authentication.delay.ms (KIP-306): a failed login
	// is answered and closed after this long (default 100ms).
	FailedAuthenticationDelay time.Duration `yaml:"failed_authentication_delay"`
}

func (l *ListenerConfig) protocol() string {
	if l.SecurityProtocol == "" {
		return ProtocolPlaintext
	}
	return strings.ToUpper(l.SecurityProtocol)
}

func (l *ListenerConfig) usesTLS() bool {
	p := l.protocol()
	return p == ProtocolSSL || p == ProtocolSASLSSL
}

func (l *ListenerConfig) usesSASL() bool {
	p := l.protocol()
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

func (l *ListenerConfig) saslMode() string {
	if l.SASL.Mode == "" {
		return SASLTerminate
	}
	return l.SASL.Mode
}

func (l *ListenerConfig) mechanisms() []string {
	if len(l.SASL.Mechanisms) == 0 {
		return auth.Mechanisms()
	}
	return l.SASL.Mechanisms
}

func (l *ListenerConfig) failedAuthDelay() time.Duration {
	if l.SASL.FailedAuthenticationDelay == 0 {
		return 100 * time.Millisecond
	}
	return max(l.SASL.FailedAuthenticationDelay, 0)
}

func (l *ListenerConfig) validateSecurity() error {
	switch l.protocol() {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return fmt.Errorf("listener %s: security_protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Name, l.SecurityProtocol)
	}
	if l.usesTLS() {
		if err := l.TLS.Validate(); err != nil {
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
	}
	if l.usesSASL() {
		switch l.saslMode() {
		case SASLTerminate, SASLPassthrough:
		default:
			return fmt.Errorf("listener %s: sasl.mode %q: want terminate or passthrough", l.Name, l.SASL.Mode)
		}
		for _, m := range l.mechanisms() {
			known := slices.Contains(auth.Mechanisms(), m) || (m == auth.MechanismOAuthBearer && l.saslMode() == SASLPassthrough)
			if !known {
				return fmt.Errorf("listener %s: sasl mechanism %q is not supported in %s mode", l.Name, m, l.saslMode())
			}
		}
	}
	if l.SSLPrincipalMappingRules != "" {
		if _, err := auth.ParseMappingRules(l.SSLPrincipalMappingRules); err != nil {
			return fmt.Errorf("listener %s: ssl_principal_mapping_rules: %w", l.Name, err)
		}
	}
	return nil
}

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

// errPreAuth is a request other than the SASL ones before authentication.
var errPreAuth = errors.New("request before authentication")

// authState is a session's SASL progress.
type authState struct {
	needed    bool        // a SASL listener and not authenticated yet
	mechanism string      // chosen by SaslHandshake
	server    auth.Server // terminate mode
	steps     int         // passthrough: SaslAuthenticate responses seen
	user      string      // passthrough: from the client's first message
	waiting   chan bool   // passthrough: the responder's verdict on a step
	raw       bool        // terminate, SaslHandshake v0: raw tokens follow
}

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
	if g.upSASL == nil || (s.ln.cfg.usesSASL() && s.ln.cfg.saslMode() == SASLPassthrough) {
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
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return err
		}
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
	if hsResp.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake %s: error %d (mechanisms %v)", m.Name(), hsResp.ErrorCode, hsResp.SupportedMechanisms)
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
		if resp.ErrorCode != 0 {
			m := ""
			if resp.ErrorMessage != nil {
				m = *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate: error %d: %s", resp.ErrorCode, m)
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

// clientTLS completes a TLS listener's handshake and, for a verified
// client certificate, maps it to the principal (mTLS).
func (s *session) clientTLS(ctx context.Context) error {
	tc, ok := s.client.(*tls.Conn)
	if !ok {
		return nil
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	s.info.TLS = true
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 || s.ln.cfg.usesSASL() {
		return nil // Kafka: SSL without a client certificate is ANONYMOUS
	}
	p, err := s.ln.mapper.PrincipalFromTLS(st)
	if err != nil {
		return fmt.Errorf("ssl principal mapping: %w", err)
	}
	s.info.Principal = p
	return nil
}

// gate applies the SASL state machine to one client request. It returns
// handled=true when the gateway answered the request itself.
func (s *session) gate(req *Request, flexible bool) (handled bool, r Reason, err error) {
	a := &s.auth
	switch {
	case !a.needed:
		// Authenticated (or not a SASL listener). A new handshake is a
		// re-authentication, which Tollgate does not offer
		// (SessionLifetimeMillis 0): Kafka answers ILLEGAL_SASL_STATE.
		if (req.Key == wire.KeySASLHandshake || req.Key == wire.KeySASLAuthenticate) && s.ln.cfg.usesSASL() && s.ln.cfg.saslMode() == SASLTerminate {
			return s.illegalSASLState(req, flexible)
		}
		if (req.Key == wire.KeySASLHandshake || req.Key == wire.KeySASLAuthenticate) && !s.ln.cfg.usesSASL() {
			return s.illegalSASLState(req, flexible)
		}
		return false, "", nil
	case req.Key == wire.KeyApiVersions:
		if s.ln.cfg.saslMode() == SASLTerminate && s.answerApiVersions(req) {
			return true, "", nil
		}
		return false, "", nil
	case req.Key == wire.KeySASLHandshake:
		if s.ln.cfg.saslMode() == SASLPassthrough && req.Version < 1 {
			return false, ReasonUnsupportedVers, errors.New("SaslHandshake v0 cannot be passed through (raw tokens have no frame the gateway can follow); use v1")
		}
		if s.ln.cfg.saslMode() == SASLPassthrough { // v0 falls through to handshake, which refuses it
			hs, err := decodeRequest[*kmsg.SASLHandshakeRequest](req)
			if err != nil {
				return false, ReasonBadFrame, err
			}
			if !slices.Contains(s.ln.cfg.mechanisms(), hs.Mechanism) {
				return s.unsupportedMechanism(req, hs.Mechanism)
			}
			a.mechanism, a.steps, a.user = hs.Mechanism, 0, ""
			return false, "", nil
		}
		return s.handshake(req)
	case req.Key == wire.KeySASLAuthenticate:
		if a.mechanism == "" {
			return false, ReasonRefused, errors.New("SaslAuthenticate before SaslHandshake")
		}
		if s.ln.cfg.saslMode() == SASLPassthrough {
			ar, err := decodeRequest[*kmsg.SASLAuthenticateRequest](req)
			if err != nil {
				return false, ReasonBadFrame, err
			}
			if a.steps == 0 {
				if u, err := auth.UserFromClientMessage(a.mechanism, ar.SASLAuthBytes); err == nil {
					a.user = u
				}
			}
			a.waiting = make(chan bool, 1)
			return false, "", nil
		}
		return s.authenticate(req, flexible)
	}
	return false, ReasonRefused, fmt.Errorf("%w: %s", errPreAuth, wire.Lookup(req.Key).Name)
}

func decodeRequest[T kmsg.Request](req *Request) (T, error) {
	var zero T
	kr := kmsg.RequestForKey(req.Key)
	kr.SetVersion(req.Version)
	if err := kr.ReadFrom(req.Payload[req.BodyOffset:]); err != nil {
		return zero, fmt.Errorf("%w: %v", wire.ErrMalformed, err)
	}
	return kr.(T), nil
}

// handshake answers SaslHandshake in terminate mode, v0 (raw tokens
// follow, see rawToken) and v1 (tokens in SaslAuthenticate). The response
// lists the enabled mechanisms, as Kafka's does.
func (s *session) handshake(req *Request) (bool, Reason, error) {
	hs, err := decodeRequest[*kmsg.SASLHandshakeRequest](req)
	if err != nil {
		return false, ReasonBadFrame, err
	}
	if !slices.Contains(s.ln.cfg.mechanisms(), hs.Mechanism) || s.gw.creds == nil {
		return s.unsupportedMechanism(req, hs.Mechanism)
	}
	srv, err := auth.NewServer(hs.Mechanism, s.gw.creds)
	if err != nil {
		return s.unsupportedMechanism(req, hs.Mechanism)
	}
	s.auth.mechanism, s.auth.server = hs.Mechanism, srv
	// v0: the exchange that follows is raw tokens, each a size-prefixed
	// frame with no header, in both directions (see rawToken).
	s.auth.raw = req.Version == 0
	return s.handshakeAnswer(req, 0, nil)
}

// unsupportedMechanism answers UNSUPPORTED_SASL_MECHANISM (33) with the
// enabled mechanisms, then closes the connection, as Kafka does (the
// handshake failure is an AuthenticationException there).
func (s *session) unsupportedMechanism(req *Request, mechanism string) (bool, Reason, error) {
	s.handshakeAnswer(req, 33, nil)
	return true, ReasonAuthFailed, fmt.Errorf("unsupported SASL mechanism %q", mechanism)
}

func (s *session) handshakeAnswer(req *Request, code int16, _ error) (bool, Reason, error) {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.ErrorCode = code
	resp.SupportedMechanisms = s.ln.cfg.mechanisms()
	resp.SetVersion(req.Version)
	s.respondLocal(req, false, wire.EncodeResponse(req.CorrelationID, false, resp))
	return true, "", nil
}

// authenticate answers one SaslAuthenticate step in terminate mode.
func (s *session) authenticate(req *Request, flexible bool) (bool, Reason, error) {
	ar, err := decodeRequest[*kmsg.SASLAuthenticateRequest](req)
	if err != nil {
		return false, ReasonBadFrame, err
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.Version)
	challenge, done, err := s.auth.server.Step(ar.SASLAuthBytes)
	if err != nil {
		// KIP-306: delay the failure, answer it (v1 flows), then close.
		s.gw.log.Warn("authentication failed", append(s.logAttrs(), "mechanism", s.auth.mechanism, "err", err.Error())...)
		if s.gw.authObs != nil {
			s.gw.authObs.AuthFailed(&s.info, s.auth.mechanism, err)
		}
		select {
		case <-time.After(s.ln.cfg.failedAuthDelay()):
		case <-s.closed:
		}
		resp.ErrorCode = 58
		resp.ErrorMessage = kmsg.StringPtr(auth.ClientMessage(err))
		s.respondLocal(req, flexible, wire.EncodeResponse(req.CorrelationID, flexible, resp))
		return true, ReasonAuthFailed, err
	}
	resp.SASLAuthBytes = challenge
	if done {
		s.info.Principal = s.auth.server.Principal()
		s.auth.needed = false
		s.gw.log.Info("authenticated", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", s.auth.mechanism)...)
	}
	s.respondLocal(req, flexible, wire.EncodeResponse(req.CorrelationID, flexible, resp))
	return true, "", nil
}

// rawToken handles one raw SASL token frame after a v0 SaslHandshake: the
// payload is the token, the answer is the challenge as a size-prefixed
// frame (PLAIN's empty final one included), a failure closes the
// connection with no error frame, as Kafka does for v0.
func (s *session) rawToken(p []byte) (Reason, error) {
	challenge, done, err := s.auth.server.Step(p)
	if err != nil {
		s.gw.log.Warn("authentication failed", append(s.logAttrs(), "mechanism", s.auth.mechanism, "err", err.Error())...)
		if s.gw.authObs != nil {
			s.gw.authObs.AuthFailed(&s.info, s.auth.mechanism, err)
		}
		select {
		case <-time.After(s.ln.cfg.failedAuthDelay()):
		case <-s.closed:
		}
		return ReasonAuthFailed, err
	}
	b := wire.GetBuffer(4 + len(challenge))
	binary.BigEndian.PutUint32(b.B, uint32(len(challenge)))
	copy(b.B[4:], challenge)
	if done {
		s.info.Principal = s.auth.server.Principal()
		s.auth.needed, s.auth.raw = false, false
		s.gw.log.Info("authenticated", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", s.auth.mechanism, "handshake", "v0")...)
	}
	s.mu.Lock()
	_, werr := s.client.Write(b.B)
	s.mu.Unlock()
	b.Release()
	if werr != nil {
		return ReasonClientClosed, werr
	}
	return "", nil
}

func (s *session) illegalSASLState(req *Request, flexible bool) (bool, Reason, error) {
	if req.Key == wire.KeySASLHandshake {
		return s.handshakeAnswer(req, 34, nil)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.Version)
	resp.ErrorCode = 34
	resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
	s.respondLocal(req, flexible, wire.EncodeResponse(req.CorrelationID, flexible, resp))
	return true, "", nil
}

// passthroughResponse inspects an upstream SaslAuthenticate response in
// pass-through mode: the exchange is complete after one successful step
// for PLAIN and OAUTHBEARER and two for SCRAM; then the user read from
// the client's first message becomes the principal.
func (s *session) passthroughResponse(buf *wire.Buffer, pr *pending) {
	a := &s.auth
	if a.waiting == nil {
		return
	}
	ok := false
	defer func() { a.waiting <- ok }()
	p := buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, pr.req.Key, pr.flexible)
	if err != nil {
		return
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(pr.req.Version)
	if resp.ReadFrom(p[off:]) != nil || resp.ErrorCode != 0 {
		return
	}
	ok = true
}

// awaitPassthrough waits, on the reader, for the responder's verdict on a
// forwarded SaslAuthenticate, so that no later request is read before the
// session knows whether (and as whom) the client is authenticated.
func (s *session) awaitPassthrough() bool {
	a := &s.auth
	if a.waiting == nil {
		return true
	}
	var ok bool
	select {
	case ok = <-a.waiting:
	case <-s.closed:
		return false
	}
	a.waiting = nil
	if !ok {
		return true // upstream refused; it closes the connection itself
	}
	a.steps++
	need := 1
	if strings.HasPrefix(a.mechanism, "SCRAM-") {
		need = 2
	}
	if a.steps >= need {
		a.needed = false
		name := a.user
		if name == "" {
			name = principal.Anonymous
		}
		s.info.Principal = principal.Principal{Type: "User", Name: name}
		s.gw.log.Info("authenticated (pass-through)", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", a.mechanism)...)
	}
	return true
}

// AuthObserver is optionally implemented by an Observer that counts and
// audits failed logins.
type AuthObserver interface {
	AuthFailed(c *principal.ConnInfo, mechanism string, err error)
}
