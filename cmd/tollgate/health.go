package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// defaultHealthURL is the admin port of the image's and the packages'
// default config.
const defaultHealthURL = "http://127.0.0.1:9644/readyz"

type healthOpts struct {
	url     string
	timeout time.Duration
}

func healthFlags(o *healthOpts, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", defaultHealthURL, "admin port `URL` to probe: /readyz (ready to serve) or /healthz (alive)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "give up after this long")
	return fs
}

// health is the container health check (the image has no shell and no
// curl): GET the URL, exit 0 on 200, 1 otherwise.
func health(args []string, stdout, stderr io.Writer) int {
	var o healthOpts
	fs := healthFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: tollgate health [--url URL] [--timeout D]")
		return 2
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "tollgate health: --url %q: want http://host:port/path\n", o.url)
		return 2
	}
	cl := &http.Client{
		Timeout: o.timeout,
		// A health check answers for this URL alone.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := cl.Get(u.String())
	if err != nil {
		fmt.Fprintln(stderr, "tollgate health:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "tollgate health: %s: %s %s\n", u, resp.Status, msg)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s %s\n", u, resp.Status, msg)
	return 0
}
