package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/auth"
)

func TestCredentialsAddUser(t *testing.T) {
	file := filepath.Join(t.TempDir(), "creds.yaml")
	var out, errb bytes.Buffer
	for _, pass := range []string{"first", "second"} {
		out.Reset()
		if code := runCredentials([]string{"add-user", "--file", file, "--user", "alice"}, strings.NewReader(pass+"\n"), &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	}
	if !strings.HasPrefix(out.String(), "replaced user alice") {
		t.Fatalf("output %q", out.String())
	}
	ms, err := auth.LoadCredentialFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ms.Plain("alice", "second"); !ok {
		t.Fatal("the new password does not log in")
	}
	if _, ok := ms.Plain("alice", "first"); ok {
		t.Fatal("the replaced password still logs in")
	}
	if code := runCredentials([]string{"add-user", "--file", file, "--user", "token"}, strings.NewReader("x\n"), &out, &errb); code != 1 {
		t.Fatalf("user token accepted: %d", code)
	}
}
