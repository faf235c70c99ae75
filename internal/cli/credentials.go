package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/auth"
)

const credentialsUsage = `usage: tollgate credentials add-user --file FILE --user NAME [--password-stdin] [--iterations N]

Adds (or replaces) a user's SCRAM-SHA-256 and SCRAM-SHA-512 credentials in a
credentials file for credentials_file: salted and iterated, never the
password. The password is read from standard input (one line). Credentials
can also be managed live through Kafka's API (kafka-configs --entity-type
users --add-config 'SCRAM-SHA-256=[password=...]').
`

// Credentials is 'tollgate credentials'.
func Credentials(args []string, stdout, stderr io.Writer) int {
	return runCredentials(args, os.Stdin, stdout, stderr)
}

func runCredentials(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "add-user" {
		fmt.Fprint(stderr, credentialsUsage)
		return 2
	}
	fs := flag.NewFlagSet("credentials add-user", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "credentials `file` (created if missing)")
	user := fs.String("user", "", "user `name`")
	iters := fs.Int("iterations", auth.DefaultIterations, "SCRAM iterations (4096-16384)")
	fs.Bool("password-stdin", true, "read the password from standard input (the only way)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *file == "" || *user == "" {
		fmt.Fprint(stderr, credentialsUsage)
		return 2
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(stderr, "tollgate credentials: reading the password:", err)
		return 1
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		fmt.Fprintln(stderr, "tollgate credentials: an empty password")
		return 1
	}
	var cf auth.CredentialFile
	if data, err := os.ReadFile(*file); err == nil {
		if err := yaml.Unmarshal(data, &cf); err != nil {
			fmt.Fprintf(stderr, "tollgate credentials: %s: %v\n", *file, err)
			return 1
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stderr, "tollgate credentials:", err)
		return 1
	}
	u, err := auth.NewCredentialFileUser(*user, password, *iters)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate credentials:", err)
		return 1
	}
	replaced := false
	for i := range cf.Users {
		if cf.Users[i].Name == *user {
			cf.Users[i], replaced = u, true
		}
	}
	if !replaced {
		cf.Users = append(cf.Users, u)
	}
	out, err := cf.Marshal()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate credentials:", err)
		return 1
	}
	if _, err := auth.ParseCredentialFile(out); err != nil {
		fmt.Fprintln(stderr, "tollgate credentials: the result does not load:", err)
		return 1
	}
	if err := os.WriteFile(*file, out, 0o600); err != nil {
		fmt.Fprintln(stderr, "tollgate credentials:", err)
		return 1
	}
	verb := "added"
	if replaced {
		verb = "replaced"
	}
	fmt.Fprintf(stdout, "%s user %s (SCRAM-SHA-256, SCRAM-SHA-512, %d iterations) in %s\n", verb, *user, *iters, *file)
	return 0
}
