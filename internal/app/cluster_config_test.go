package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cluster section's mistakes get a clear error at load, never a start
// that signs with a weak secret or trusts without one.
func TestClusterConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "cluster.key")
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  ClusterConfig
		want string // "" when valid
	}{
		{"signed", ClusterConfig{ID: "c", SecretFile: good, PreviousSecretFile: good, SecretGrace: time.Hour, MaxClockSkew: time.Minute}, ""},
		{"secret without a cluster", ClusterConfig{SecretFile: good}, "need cluster.id"},
		{"missing secret file", ClusterConfig{ID: "c", SecretFile: filepath.Join(dir, "none")}, "cluster.secret_file"},
		{"short secret", ClusterConfig{ID: "c", SecretFile: short}, "at least 32"},
		{"short previous secret", ClusterConfig{ID: "c", SecretFile: good, PreviousSecretFile: short}, "cluster.previous_secret_file"},
		{"previous secret without a secret", ClusterConfig{ID: "c", PreviousSecretFile: good}, "need cluster.secret_file"},
		{"accept_unsigned without a secret", ClusterConfig{ID: "c", AcceptUnsigned: true}, "need cluster.secret_file"},
		{"negative grace", ClusterConfig{ID: "c", SecretFile: good, SecretGrace: -time.Hour}, "cluster.secret_grace"},
		{"skew under a second", ClusterConfig{ID: "c", SecretFile: good, MaxClockSkew: 500 * time.Millisecond}, "cluster.max_clock_skew"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
