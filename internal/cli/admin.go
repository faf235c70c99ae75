package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tollgate/tollgate/internal/api"
)

// defaultAdminURL is Tollgate's default admin HTTP port.
const defaultAdminURL = "http://127.0.0.1:9644"

// apiKeyEnv is the environment variable that holds the API key the
// commands send to the admin port.
const apiKeyEnv = "TOLLGATE_API_KEY"

// adminFlags are how a command reaches Tollgate's admin HTTP port: its URL,
// the API key to authenticate with, and TLS material for https.
type adminFlags struct {
	url      string
	apiKey   string
	caFile   string
	certFile string
	keyFile  string
}

const adminFlagsUsage = `  --admin-url URL          Tollgate's admin HTTP port (default http://127.0.0.1:9644)
  --api-key KEY            API key sent as "Authorization: Bearer KEY" (default: $TOLLGATE_API_KEY;
                           prefer the variable: a flag is visible to other users in ps)
  --admin-ca-file FILE     PEM CA bundle the port's https certificate is verified against
                           (default: the system's roots)
  --admin-cert-file FILE   PEM client certificate, for a port with http.tls.client_auth
  --admin-key-file FILE    its private key
`

func (f *adminFlags) register(fs *flag.FlagSet, defaultURL, urlHelp string) {
	fs.StringVar(&f.url, "admin-url", defaultURL, urlHelp)
	fs.StringVar(&f.apiKey, "api-key", "", "API `key` sent as a Bearer token (default $"+apiKeyEnv+")")
	fs.StringVar(&f.caFile, "admin-ca-file", "", "PEM CA bundle `file` for an https admin port")
	fs.StringVar(&f.certFile, "admin-cert-file", "", "PEM client certificate `file` for the admin port")
	fs.StringVar(&f.keyFile, "admin-key-file", "", "PEM private key `file` of --admin-cert-file")
}

// client builds the admin client; env supplies $TOLLGATE_API_KEY and
// receives the warning about a key sent in clear.
func (f *adminFlags) client(env *Env) (*adminClient, error) {
	raw := f.url
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--admin-url %s is not an http:// or https:// URL", raw)
	}
	key := f.apiKey
	if key == "" {
		key = env.getenv(apiKeyEnv)
	}
	if strings.ContainsAny(key, " \t\r\n") {
		return nil, errors.New("the API key contains white space (check --api-key or $" + apiKeyEnv + ")")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the admin port is the operator's own: never through a proxy
	if f.caFile != "" || f.certFile != "" || f.keyFile != "" {
		if u.Scheme != "https" {
			return nil, errors.New("--admin-ca-file, --admin-cert-file and --admin-key-file need an https:// --admin-url")
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.caFile != "" {
			pem, err := os.ReadFile(f.caFile)
			if err != nil {
				return nil, fmt.Errorf("--admin-ca-file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--admin-ca-file %s: no PEM certificate in it", f.caFile)
			}
		}
		if (f.certFile == "") != (f.keyFile == "") {
			return nil, errors.New("--admin-cert-file and --admin-key-file go together")
		}
		if f.certFile != "" {
			cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
			if err != nil {
				return nil, fmt.Errorf("--admin-cert-file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = tc
	}
	if key != "" && u.Scheme == "http" && !loopback(u.Hostname()) {
		fmt.Fprintf(env.Stderr, "warning: sending an API key to %s over plain HTTP: anyone on the path can read it (use https and http.tls)\n", u.Host)
	}
	return &adminClient{
		base: strings.TrimRight(u.String(), "/"),
		key:  key,
		http: &http.Client{Timeout: env.timeout(), Transport: tr},
	}, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// adminClient speaks Tollgate's admin HTTP API.
type adminClient struct {
	base string
	key  string // sent as a Bearer token when set
	http *http.Client
}

// do sends a request and decodes a JSON answer with status want into out;
// any other status is an error carrying the API's {"error": ...} message.
func (c *adminClient) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tollgate-cli")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Tollgate's admin port at %s (is the gateway running? see --admin-url): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		var e api.Error
		msg := fmt.Sprintf("%s %s: HTTP %s", method, c.base+path, resp.Status)
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = fmt.Sprintf("%s (HTTP %s)", e.Error, resp.Status)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			if c.key == "" {
				msg += "; set $" + apiKeyEnv + " (or --api-key) to an API key"
			} else {
				msg += "; check the key in --api-key or $" + apiKeyEnv
			}
		}
		return &statusError{status: resp.StatusCode, msg: msg}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer: %w", method, c.base+path, err)
	}
	return nil
}

// statusError is an answer of the admin port with another status than the
// one asked for: a caller may tell one status (404) from the others.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// adminCommand is one command of a group that asks the admin port
// (tollgate apikeys, tollgate tenants): its group and name, and its flag
// set with the admin port's flags on it.
type adminCommand struct {
	group, name string
	fs          *flag.FlagSet
	admin       adminFlags
}

// newAdminCommand picks the command args[0] of group, one of names, and
// makes its flag set. When there is none to run (none given, help, an
// unknown one) it has printed the usage and done is true: exit with code.
func newAdminCommand(env *Env, group, usage string, args []string, names ...string) (ac *adminCommand, code int, done bool) {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return nil, 2, true
	}
	switch name := args[0]; {
	case slices.Contains(names, name):
	case name == "-h" || name == "--help" || name == "help":
		fmt.Fprint(env.Stdout, usage)
		return nil, 0, true
	default:
		fmt.Fprintf(env.Stderr, "tollgate %s: unknown command %q\n\n", group, name)
		fmt.Fprint(env.Stderr, usage)
		return nil, 2, true
	}
	ac = &adminCommand{group: group, name: args[0], fs: flag.NewFlagSet(group+" "+args[0], flag.ContinueOnError)}
	ac.fs.SetOutput(env.Stderr)
	ac.fs.Usage = func() { fmt.Fprint(ac.fs.Output(), usage) }
	ac.admin.register(ac.fs, defaultAdminURL, "Tollgate's admin HTTP `URL`")
	return ac, 0, false
}

// fail says what is wrong with the command line: exit code 2.
func (ac *adminCommand) fail(env *Env, format string, a ...any) int {
	fmt.Fprintf(env.Stderr, "tollgate %s %s: %s\n", ac.group, ac.name, fmt.Sprintf(format, a...))
	return 2
}

// commandLineError is what is wrong with the command line, found while
// asking the admin port: run says it as fail does.
type commandLineError struct{ error }

// run asks the admin port with ask, within --timeout; it returns the exit
// code.
func (ac *adminCommand) run(ctx context.Context, env *Env, ask func(context.Context, *adminClient) error) int {
	c, err := ac.admin.client(env)
	if err != nil {
		return ac.fail(env, "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	err = ask(ctx, c)
	var cle commandLineError
	switch {
	case errors.As(err, &cle):
		return ac.fail(env, "%v", cle.error)
	case err != nil:
		fmt.Fprintf(env.Stderr, "tollgate %s %s: %v\n", ac.group, ac.name, err)
		return 1
	}
	return 0
}

// newTable is a table on w, its columns two spaces apart, under header.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// listTable GETs path from the admin port as a B and prints the rows of
// it, under header; none when there is no row.
func listTable[B any](ctx context.Context, c *adminClient, env *Env, path, none, header string, rows func(B) [][]string) error {
	var body B
	if err := c.do(ctx, "GET", path, nil, http.StatusOK, &body); err != nil {
		return err
	}
	rs := rows(body)
	if len(rs) == 0 {
		fmt.Fprintln(env.Stdout, none)
		return nil
	}
	tw := newTable(env.Stdout, header)
	for _, r := range rs {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
