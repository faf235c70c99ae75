package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// defaultAdminURL is Tollgate's default admin HTTP port.
const defaultAdminURL = "http://127.0.0.1:9644"

const apiKeysUsage = `usage: tollgate apikeys <command> [flags]

commands:
  create --identity NAME   make an API key for NAME; the key is printed once
  list                     list the keys (never the keys themselves)
  revoke ID                revoke a key: it stops authenticating at once

flags:
  --admin-url URL          Tollgate's admin HTTP port (default http://127.0.0.1:9644)

A client authenticates with an API key through SASL/PLAIN with the user
name "token" and the key as password; its principal is User:NAME, so every
key of one identity shares that user's quotas. Tollgate keeps only a hash
of each key. These commands use Tollgate's admin HTTP API
(/api/v1/apikeys), an operator interface that listens on 127.0.0.1 by
default: run them on the gateway's host.
`

// APIKeys is `tollgate apikeys create|list|revoke`.
func APIKeys(args []string, stdout, stderr io.Writer) int {
	return runAPIKeys(context.Background(), osEnv(stdout, stderr), args)
}

func runAPIKeys(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, apiKeysUsage)
		return 2
	}
	switch args[0] {
	case "create", "list", "revoke":
	case "-h", "--help", "help":
		fmt.Fprint(env.Stdout, apiKeysUsage)
		return 0
	default:
		fmt.Fprintf(env.Stderr, "tollgate apikeys: unknown command %q\n\n", args[0])
		fmt.Fprint(env.Stderr, apiKeysUsage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("apikeys "+cmd, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), apiKeysUsage) }
	adminURL := fs.String("admin-url", defaultAdminURL, "Tollgate's admin HTTP `URL`")
	identity := fs.String("identity", "", "the principal `name` the key authenticates as (create)")
	// Flags may come before or after the command's argument.
	rest := args[1:]
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "tollgate apikeys %s: %s\n", cmd, fmt.Sprintf(format, a...))
		return 2
	}
	switch {
	case cmd == "create" && *identity == "":
		return fail("--identity is required (the principal name the key authenticates as)")
	case cmd != "create" && *identity != "":
		return fail("--identity applies to create only")
	case cmd == "revoke" && len(pos) != 1:
		return fail("give the id of the key to revoke (tollgate apikeys list shows them)")
	case cmd != "revoke" && len(pos) > 0:
		return fail("unexpected argument %q", pos[0])
	}
	c, err := newAdminClient(*adminURL, env.timeout())
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	switch cmd {
	case "create":
		err = c.create(ctx, env, *identity)
	case "list":
		err = c.list(ctx, env)
	case "revoke":
		err = c.revoke(ctx, env, pos[0])
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "tollgate apikeys %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// apiKey is an API key as the admin API answers it.
type apiKey struct {
	ID       string `json:"id"`
	Identity string `json:"identity"`
	Key      string `json:"key"`
	Created  string `json:"created"`
	Revoked  bool   `json:"revoked"`
}

// adminClient speaks Tollgate's admin HTTP API.
type adminClient struct {
	base string
	http *http.Client
}

func newAdminClient(raw string, timeout time.Duration) (*adminClient, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--admin-url %s is not an http:// or https:// URL", raw)
	}
	return &adminClient{base: strings.TrimRight(u.String(), "/"), http: &http.Client{Timeout: timeout}}, nil
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
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s (HTTP %s)", e.Error, resp.Status)
		}
		return fmt.Errorf("%s %s: HTTP %s", method, c.base+path, resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer: %w", method, c.base+path, err)
	}
	return nil
}

func (c *adminClient) create(ctx context.Context, env *Env, identity string) error {
	var k apiKey
	if err := c.do(ctx, "POST", "/api/v1/apikeys", map[string]string{"identity": identity}, http.StatusCreated, &k); err != nil {
		return err
	}
	if k.Key == "" {
		return errors.New("the admin API answered without a key")
	}
	fmt.Fprintf(env.Stdout, "Created API key %s for identity %s.\n\n    %s\n\n", k.ID, k.Identity, k.Key)
	fmt.Fprintln(env.Stdout, "Store this key now: it cannot be shown again (Tollgate keeps only its hash).")
	fmt.Fprintf(env.Stdout, "Clients authenticate with SASL/PLAIN, username %q, this key as password, as User:%s.\n", "token", k.Identity)
	return nil
}

func (c *adminClient) list(ctx context.Context, env *Env) error {
	var body struct {
		APIKeys []apiKey `json:"apikeys"`
	}
	if err := c.do(ctx, "GET", "/api/v1/apikeys", nil, http.StatusOK, &body); err != nil {
		return err
	}
	if len(body.APIKeys) == 0 {
		fmt.Fprintln(env.Stdout, "No API keys.")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tIDENTITY\tCREATED\tREVOKED")
	for _, k := range body.APIKeys {
		revoked := "no"
		if k.Revoked {
			revoked = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Identity, k.Created, revoked)
	}
	return tw.Flush()
}

func (c *adminClient) revoke(ctx context.Context, env *Env, id string) error {
	var k apiKey
	if err := c.do(ctx, "DELETE", "/api/v1/apikeys/"+url.PathEscape(id), nil, http.StatusOK, &k); err != nil {
		return err
	}
	if k.Identity != "" {
		fmt.Fprintf(env.Stdout, "Revoked API key %s (identity %s).\n", k.ID, k.Identity)
	} else {
		fmt.Fprintf(env.Stdout, "Revoked API key %s.\n", k.ID)
	}
	return nil
}
