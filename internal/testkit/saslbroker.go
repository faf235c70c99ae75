package testkit

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"

	"github.com/tollgate/tollgate/internal/wire"
)

// SASLBroker is a one-broker stand-in for a Kafka broker whose listener
// requires SASL, for what kfake cannot play: OAUTHBEARER, and SCRAM and
// PLAIN answered exactly as Kafka's servers answer them. It follows
// org.apache.kafka.common.security.authenticator.SaslServerAuthenticator
// (before authentication only ApiVersions, SaslHandshake and
// SaslAuthenticate are read; anything else closes the connection; a failed
// step is answered SASL_AUTHENTICATION_FAILED and the connection closed)
// and the mechanisms' servers:
//
//   - PlainSaslServer: one step; a wrong password is an
//     SaslAuthenticationException ("Authentication failed: Invalid
//     username or password").
//   - ScramSaslServer: client-first → server-first (r=,s=,i=); client-final
//     → the proof is verified, then server-final (v=) and complete; an
//     unknown user or a bad proof is an SaslAuthenticationException.
//   - OAuthBearerSaslServer: a valid token completes with an empty answer;
//     an invalid one is answered with error 0 and the error challenge
//     {"status":"invalid_token"}, and only the client's %x01 after it is an
//     SaslAuthenticationException; any other message is evaluated as a new
//     initial response.
//
// After login it answers ApiVersions and Metadata (itself as node 0); any
// other request closes the connection. It records the principal of every
// completed login.
type SASLBroker struct {
	ln      net.Listener
	users   map[string]string // PLAIN and SCRAM passwords
	tokens  map[string]string // OAUTHBEARER: valid token -> principal
	cluster string

	mu     sync.Mutex
	logins []string // principals of completed logins, in order
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartSASLBroker listens on loopback; users are the PLAIN/SCRAM users
// and passwords, tokens the OAUTHBEARER tokens it accepts (the value is
// the principal a broker's validator would give the token). It stops when
// the test ends.
func StartSASLBroker(t testing.TB, users, tokens map[string]string) *SASLBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &SASLBroker{ln: ln, users: users, tokens: tokens, cluster: "sasl-stand-in", conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.Close)
	return b
}

// Addr is the broker's address.
func (b *SASLBroker) Addr() string { return b.ln.Addr().String() }

// Logins returns the principals of the logins the broker completed.
func (b *SASLBroker) Logins() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.logins...)
}

// Close stops the broker and closes its connections.
func (b *SASLBroker) Close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *SASLBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() {
				b.mu.Lock()
				delete(b.conns, c)
				b.mu.Unlock()
				c.Close()
			}()
			b.serve(c)
		}()
	}
}

// saslState is one connection's SaslServerAuthenticator.
type saslState struct {
	mechanism string
	done      bool
	scram     *xscram.ServerConversation
	oauthErr  string // the error challenge last sent (OAuthBearerSaslServer.errorMessage)
}

func (b *SASLBroker) serve(c net.Conn) {
	var st saslState
	for {
		buf, err := wire.ReadFrame(c, 1<<20)
		if err != nil {
			return
		}
		p := buf.B[4:]
		h, err := wire.ParseRequestHeader(p)
		if err != nil {
			buf.Release()
			return
		}
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(p[h.BodyOffset:]); err != nil {
			buf.Release()
			return
		}
		// The decoded request's bytes alias buf: released once handled.
		resp, closeAfter := b.handle(&st, req)
		buf.Release()
		if resp == nil {
			return
		}
		resp.SetVersion(h.Version)
		out := wire.EncodeResponse(h.CorrelationID, h.API.Flexible(h.Version), resp)
		_, err = c.Write(out.B)
		out.Release()
		if err != nil || closeAfter {
			return
		}
	}
}

// handle answers one request; nil closes the connection, closeAfter closes
// it once the answer is written.
func (b *SASLBroker) handle(st *saslState, req kmsg.Request) (kmsg.Response, bool) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		for _, k := range []struct{ key, min, max int16 }{
			{int16(kmsg.ApiVersions), 0, 3}, {int16(kmsg.Metadata), 0, 12},
			{int16(kmsg.SASLHandshake), 0, 1}, {int16(kmsg.SASLAuthenticate), 0, 2},
		} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MinVersion: k.min, MaxVersion: k.max})
		}
		return resp, false
	case *kmsg.SASLHandshakeRequest:
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.SupportedMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
		if st.done || st.mechanism != "" {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, true
		}
		switch r.Mechanism {
		case "PLAIN", "OAUTHBEARER":
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			st.scram = b.scramServer(r.Mechanism).NewConversation()
		default:
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, true
		}
		st.mechanism = r.Mechanism
		return resp, false
	case *kmsg.SASLAuthenticateRequest:
		if st.done || st.mechanism == "" {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, true
		}
		challenge, principal, err := b.step(st, r.SASLAuthBytes)
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			return resp, true
		}
		resp.SASLAuthBytes = challenge
		if principal != "" {
			st.done = true
			b.mu.Lock()
			b.logins = append(b.logins, principal)
			b.mu.Unlock()
		}
		return resp, false
	case *kmsg.MetadataRequest:
		if !st.done {
			return nil, true
		}
		host, port, _ := net.SplitHostPort(b.Addr())
		p, _ := strconv.Atoi(port)
		resp := kmsg.NewPtrMetadataResponse()
		resp.ClusterID = kmsg.StringPtr(b.cluster)
		resp.ControllerID = 0
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
		return resp, false
	}
	return nil, true // any other request: the stand-in does not serve it
}

// step is one evaluateResponse of the connection's mechanism server. A
// non-empty principal means the exchange completed.
func (b *SASLBroker) step(st *saslState, msg []byte) (challenge []byte, principal string, err error) {
	switch st.mechanism {
	case "PLAIN":
		parts := strings.Split(string(msg), "\x00")
		if len(parts) != 3 || parts[1] == "" || b.users[parts[1]] == "" || b.users[parts[1]] != parts[2] {
			return nil, "", errors.New("Authentication failed: Invalid username or password")
		}
		return []byte{}, parts[1], nil
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		out, err := st.scram.Step(string(msg))
		if err != nil {
			return nil, "", errors.New("Authentication failed: Invalid user credentials")
		}
		if st.scram.Done() {
			return []byte(out), st.scram.Username(), nil
		}
		return []byte(out), "", nil
	case "OAUTHBEARER":
		if len(msg) == 1 && msg[0] == 0x01 && st.oauthErr != "" {
			return nil, "", fmt.Errorf("%s", st.oauthErr)
		}
		st.oauthErr = ""
		token, ok := bearerToken(msg)
		if p, valid := b.tokens[token]; ok && valid {
			return []byte{}, p, nil
		}
		st.oauthErr = `{"status":"invalid_token"}`
		return []byte(st.oauthErr), "", nil
	}
	return nil, "", errors.New("no mechanism")
}

func (b *SASLBroker) scramServer(mechanism string) *xscram.Server {
	var h xscram.HashGeneratorFcn = func() hash.Hash { return sha256.New() }
	if mechanism == "SCRAM-SHA-512" {
		h = func() hash.Hash { return sha512.New() }
	}
	srv, _ := h.NewServer(func(user string) (xscram.StoredCredentials, error) {
		pw, ok := b.users[user]
		if !ok {
			return xscram.StoredCredentials{}, errors.New("unknown user")
		}
		client, err := h.NewClientUnprepped(user, pw, "")
		if err != nil {
			return xscram.StoredCredentials{}, err
		}
		kf := xscram.KeyFactors{Salt: "stand-in-salt-" + user, Iters: 4096}
		return client.GetStoredCredentials(kf), nil
	})
	return srv
}

// bearerToken reads the token of an OAUTHBEARER initial response
// (n,,\x01auth=Bearer <token>\x01...\x01).
func bearerToken(msg []byte) (string, bool) {
	_, rest, ok := strings.Cut(string(msg), "\x01auth=Bearer ")
	if !ok {
		return "", false
	}
	token, _, ok := strings.Cut(rest, "\x01")
	return token, ok
}
