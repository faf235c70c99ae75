package e2e

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Each kind of bad input closes only its own connection, with a log line
// that says why, while a well-behaved client keeps producing.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	good := newClient(t, env, nil, kgo.DefaultProduceTopic("steady"), kgo.AllowAutoTopicCreation())
	produce := func(step string) {
		t.Helper()
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(step)}).FirstErr(); err != nil {
			t.Fatalf("after %s: the good client could not produce: %v", step, err)
		}
	}
	produce("start")

	frame := func(payload []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(payload))) // size prefix
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	// A Produce v7 whose body stops inside the transactional id.
	truncatedProduce := append(header(0, 7), 0x00, 0x10, 'a')

	cases := []struct {
		name   string
		send   []byte
		reason string
	}{
		{"frame over socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, 104857601), "reason=frame_too_large"},
		{"negative length", binary.BigEndian.AppendUint32(nil, 0xfffffff0), "reason=malformed_frame"},
		{"garbage bytes", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "reason=frame_too_large"},
		{"unknown API key", append(frame(header(200, 0)), header(200, 0)...), "reason=unknown_api_key"},
		{"negative API key", append(frame(header(-3327, 0)), header(-3327, 0)...), "reason=unknown_api_key"},
		{"version newer than the gateway parses", append(frame(header(3, 99)), header(3, 99)...), "reason=unsupported_version"},
		{"frame shorter than a header", append(frame([]byte{0, 3, 0}), 0, 3, 0), "reason=malformed_frame"},
		{"unparseable produce", append(frame(truncatedProduce), truncatedProduce...), "reason=malformed_frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", env.Bootstrap)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			if !env.Logs.WaitFor(tc.reason, 5*time.Second) {
				t.Errorf("no log line with %q", tc.reason)
			}
			produce(tc.name)
		})
	}

	t.Run("TLS hello on the plaintext port", func(t *testing.T) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", env.Bootstrap, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			t.Fatal("TLS handshake succeeded against a plaintext listener")
		}
		if !env.Logs.WaitFor("reason=tls_on_plaintext", 5*time.Second) {
			t.Error("no log line with reason=tls_on_plaintext")
		}
		produce("tls")
	})

	t.Run("too-new ApiVersions gets the KIP-511 answer", func(t *testing.T) {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 9 // newer than anything kmsg knows
		var f kmsg.RequestFormatter
		// The formatter needs a version it can encode; v9 has v3+'s layout.
		b := f.AppendRequest(nil, req, 42)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		body, err := readFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != 42 {
			t.Fatalf("correlation id %d, want 42", corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != int16(kmsg.ApiVersions) || resp.ApiKeys[0].MaxVersion != 5 {
			t.Fatalf("got %+v, want error 35 and [{18 0 5}]", resp)
		}
	})
}
