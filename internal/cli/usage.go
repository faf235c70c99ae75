package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/internal/usage"
)

const usageUsage = `usage: tollgate usage [--since T] [--until T] [--by user|client-id|user,client-id|tenant|topic|user,topic]
                      [--format table|csv|json] [--admin-url URL | --data-dir DIR]

Reports the usage ledger, for chargeback: per user, client id or both, the
produce bytes, fetch bytes, requests, throttle time and partition mutations
of the minutes that start in [since, until). Minutes are written when they
close: the current minute appears within a second of its end.

It asks the admin port (GET /api/v1/usage; any authenticated principal may
read), or with --data-dir reads a data_dir's ledger directly (a stopped
gateway's, or a copy).

flags:
  --since T                a time ago (24h, 90m, 7d) or a time: 2025-06-01T12:00:00Z,
                           2025-06-01T12:00 or 2025-06-01 (UTC) (default 24h)
  --until T                likewise (default now)
  --by B                   user (default), client-id, user,client-id or tenant (each
                           user's tenant when the minute was written; "(no tenant)" for
                           users in none); topic or user,topic: the per-topic rows (record
                           bytes, while per-topic quotas exist)
  --format F               table (default), csv or json
  --data-dir DIR           read DIR/usage instead of asking the admin port
` + adminFlagsUsage

// Usage is `tollgate usage`.
func Usage(args []string, stdout, stderr io.Writer) int {
	return runUsage(context.Background(), osEnv(stdout, stderr), args, time.Now)
}

func runUsage(ctx context.Context, env *Env, args []string, now func() time.Time) int {
	fset := flag.NewFlagSet("usage", flag.ContinueOnError)
	fset.SetOutput(env.Stderr)
	fset.Usage = func() { fmt.Fprint(fset.Output(), usageUsage) }
	var (
		admin                          adminFlags
		since, until, by, format, dDir string
	)
	admin.register(fset, defaultAdminURL, "Tollgate's admin HTTP `URL`")
	fset.StringVar(&since, "since", "24h", "start: a time `ago` or a time")
	fset.StringVar(&until, "until", "", "end: a time `ago` or a time (default now)")
	fset.StringVar(&by, "by", usage.ByUser, "group `by` user, client-id, user,client-id, tenant, topic or user,topic")
	fset.StringVar(&format, "format", usage.FormatTable, "output `format`: table, csv or json")
	fset.StringVar(&dDir, "data-dir", "", "read this data_dir's ledger `directory` directly")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(env.Stderr, "tollgate usage:", err)
		return code
	}
	if fset.NArg() > 0 {
		return fail(2, fmt.Errorf("unexpected argument %q", fset.Arg(0)))
	}
	if err := usage.ValidFormat(format); err != nil {
		return fail(2, fmt.Errorf("--%w", err))
	}
	q, err := usageQuery(by, since, until, now())
	if err != nil {
		return fail(2, err)
	}
	var rep *usage.Report
	if dDir != "" {
		if adminFlagsSet(fset) {
			return fail(2, errors.New("--data-dir reads the ledger directly: it takes no admin port flags"))
		}
		if rep, err = readLedger(dDir, q); err != nil {
			return fail(1, err)
		}
	} else {
		c, err := admin.client(env)
		if err != nil {
			return fail(2, err)
		}
		if rep, err = c.usage(ctx, env, q); err != nil {
			return fail(1, err)
		}
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(env.Stderr, "warning:", w)
	}
	if err := rep.Write(env.Stdout, format); err != nil {
		return fail(1, err)
	}
	return 0
}

// usageQuery is the query --by, --since and --until ask for, at t.
func usageQuery(by, since, until string, t time.Time) (usage.Query, error) {
	q := usage.Query{By: by, Until: t}
	var err error
	if q.Since, err = usage.ParseTime(since, t); err != nil {
		return q, fmt.Errorf("--since %w", err)
	}
	if until != "" {
		if q.Until, err = usage.ParseTime(until, t); err != nil {
			return q, fmt.Errorf("--until %w", err)
		}
	}
	if err := q.Validate(); err != nil {
		return q, fmt.Errorf("--%w", err)
	}
	return q, nil
}

// adminFlagsSet reports whether the command line gave an admin port flag.
func adminFlagsSet(fset *flag.FlagSet) bool {
	set := false
	fset.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "admin-url", "api-key", "admin-ca-file", "admin-cert-file", "admin-key-file":
			set = true
		}
	})
	return set
}

// readLedger answers q from the usage ledger of the data_dir dDir.
func readLedger(dDir string, q usage.Query) (*usage.Report, error) {
	if st, err := os.Stat(dDir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		} else if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("no such directory")
		}
		return nil, fmt.Errorf("--data-dir %s: %w", dDir, err)
	}
	return usage.Read(filepath.Join(dDir, "usage"), q)
}

// usage asks the admin port to answer q.
func (c *adminClient) usage(ctx context.Context, env *Env, q usage.Query) (*usage.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	// The range as computed here, so that both sources answer the
	// same minutes.
	v := url.Values{"since": {q.Since.UTC().Format(time.RFC3339Nano)}, "until": {q.Until.UTC().Format(time.RFC3339Nano)}, "by": {q.By}}
	rep := &usage.Report{}
	if err := c.do(ctx, http.MethodGet, "/api/v1/usage?"+v.Encode(), nil, http.StatusOK, rep); err != nil {
		return nil, err
	}
	return rep, nil
}
