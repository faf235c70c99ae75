package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/clientconf"
)

// connWatch remembers the last connection problem of a client, so that a
// command that times out can say why (a broker that drops the connection
// during SASL, as the embedded cluster does on a wrong password, otherwise
// only shows up as a timeout).
type connWatch struct {
	sasl string // the SASL mechanism, if any
	mu   sync.Mutex
	last string
}

func (w *connWatch) note(s string) {
	w.mu.Lock()
	w.last = s
	w.mu.Unlock()
}

func (w *connWatch) lastProblem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *connWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		if w.sasl != "" {
			w.note(fmt.Sprintf("%s closed the connection while authenticating: check sasl.mechanism (%s) and the username and password of sasl.jaas.config", addr, w.sasl))
		} else {
			w.note(fmt.Sprintf("%s closed the connection while connecting: check security.protocol", addr))
		}
		return
	}
	w.note(fmt.Sprintf("connecting to %s: %v", addr, err))
}

// clientConfig is a client properties file's configuration.
type clientConfig = clientconf.Config

// newClientConfig interprets --bootstrap-server and --command-config's
// properties (nil when none was given).
func newClientConfig(bootstrap string, props map[string]string) (*clientConfig, error) {
	return clientconf.New(bootstrap, props, "tollgate-cli")
}

func loadProps(path string) (map[string]string, error) { return clientconf.LoadProps(path) }

// newClient connects an admin client.
func newClient(c *clientConfig) (*kgo.Client, *connWatch, error) {
	w := &connWatch{sasl: c.Mechanism}
	cl, err := kgo.NewClient(append(c.Opts(), kgo.WithHooks(w))...)
	return cl, w, err
}
