package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/auth"
)

const apiKeysUsage = `usage: tollgate apikeys <command> [flags]

commands:
  create --identity NAME   make an API key for NAME; the key is printed once
  list                     list the keys (never the keys themselves)
  revoke ID                revoke a key: it stops authenticating at once

flags:
` + adminFlagsUsage + `  --file FILE              create only: write the key (hashed) into this credentials_file
                           instead of asking the admin port (the first admin key, before the
                           gateway runs; it loads the file at start)

A client authenticates with an API key through SASL/PLAIN with the user
name "token" and the key as password; its principal is User:NAME, so every
key of one identity shares that user's quotas. On the admin port the key is
sent as "Authorization: Bearer KEY". Tollgate keeps only a hash of each key.

These commands use Tollgate's admin HTTP API (/api/v1/apikeys). Creating and
revoking need a key of a quota admin (authorization.quota_admins), listing
any key; the built-in development config needs none.
`

// APIKeys is `tollgate apikeys create|list|revoke`.
func APIKeys(args []string, stdout, stderr io.Writer) int {
	return runAPIKeys(context.Background(), osEnv(stdout, stderr), args)
}

func runAPIKeys(ctx context.Context, env *Env, args []string) int {
	ac, code, done := newAdminCommand(env, "apikeys", apiKeysUsage, args, "create", "list", "revoke")
	if done {
		return code
	}
	cmd, fs := ac.name, ac.fs
	identity := fs.String("identity", "", "the principal `name` the key authenticates as (create)")
	file := fs.String("file", "", "create only: the credentials `file` to write the key into, offline")
	// Flags may come before or after the command's argument.
	pos, code, ok := parseInterleaved(fs, args[1:])
	if !ok {
		return code
	}
	switch {
	case cmd == "create" && *identity == "":
		return ac.fail(env, "--identity is required (the principal name the key authenticates as)")
	case cmd != "create" && *identity != "":
		return ac.fail(env, "--identity applies to create only")
	case cmd == "revoke" && len(pos) != 1:
		return ac.fail(env, "give the id of the key to revoke (tollgate apikeys list shows them)")
	case cmd != "revoke" && len(pos) > 0:
		return ac.fail(env, "unexpected argument %q", pos[0])
	case cmd != "create" && *file != "":
		return ac.fail(env, "--file applies to create only")
	}
	if *file != "" {
		if err := createInFile(env, *file, *identity); err != nil {
			fmt.Fprintf(env.Stderr, "tollgate apikeys create: %v\n", err)
			return 1
		}
		return 0
	}
	return ac.run(ctx, env, func(ctx context.Context, c *adminClient) error {
		switch cmd {
		case "create":
			return c.create(ctx, env, *identity)
		case "list":
			return c.list(ctx, env)
		}
		return c.revoke(ctx, env, pos[0])
	})
}

func (c *adminClient) create(ctx context.Context, env *Env, identity string) error {
	var k api.APIKey
	if err := c.do(ctx, "POST", "/api/v1/apikeys", api.APIKeyCreate{Identity: &identity}, http.StatusCreated, &k); err != nil {
		return err
	}
	if k.Key == "" {
		return errors.New("the admin API answered without a key")
	}
	printCreated(env, k.ID, k.Identity, k.Key)
	return nil
}

func printCreated(env *Env, id, identity, key string) {
	fmt.Fprintf(env.Stdout, "Created API key %s for identity %s.\n\n    %s\n\n", id, identity, key)
	fmt.Fprintln(env.Stdout, "Store this key now: it cannot be shown again (Tollgate keeps only its hash).")
	fmt.Fprintf(env.Stdout, "Clients authenticate with SASL/PLAIN, username %q, this key as password, as User:%s;\n", "token", identity)
	fmt.Fprintln(env.Stdout, "on the admin port with \"Authorization: Bearer <key>\" (TOLLGATE_API_KEY for these commands).")
}

// createInFile adds a key for identity to a credentials file (created if
// missing), as the running gateway's store would hold it: only its hash.
func createInFile(env *Env, file, identity string) error {
	if err := api.CheckIdentity(identity); err != nil {
		return err
	}
	var cf auth.CredentialFile
	if data, err := os.ReadFile(file); err == nil {
		if _, err := auth.ParseCredentialFile(data); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := yaml.Unmarshal(data, &cf); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	plaintext, key, err := auth.NewAPIKey(identity)
	if err != nil {
		return err
	}
	cf.APIKeys = append(cf.APIKeys, auth.NewCredentialFileAPIKey(key))
	out, err := cf.Marshal()
	if err != nil {
		return err
	}
	if _, err := auth.ParseCredentialFile(out); err != nil {
		return fmt.Errorf("the result does not load: %w", err)
	}
	if err := os.WriteFile(file, out, 0o600); err != nil {
		return err
	}
	printCreated(env, key.ID, identity, plaintext)
	fmt.Fprintf(env.Stdout, "Written (hashed) to %s: the gateway loads it at start (credentials_file).\n", file)
	return nil
}

func (c *adminClient) list(ctx context.Context, env *Env) error {
	return listTable(ctx, c, env, "/api/v1/apikeys", "No API keys.", "ID\tIDENTITY\tCREATED\tREVOKED", func(body api.APIKeys) (rows [][]string) {
		for _, k := range body.APIKeys {
			revoked := "no"
			if k.Revoked {
				revoked = "yes"
			}
			rows = append(rows, []string{k.ID, k.Identity, k.Created, revoked})
		}
		return rows
	})
}

func (c *adminClient) revoke(ctx context.Context, env *Env, id string) error {
	var k api.APIKey
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

// parseInterleaved parses args with flags before, between or after the
// positional arguments, which it returns. ok is false when parsing ended
// the command: code 0 for -h, 2 for a bad flag (already reported).
func parseInterleaved(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
