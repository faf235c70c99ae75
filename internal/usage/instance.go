package usage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/internal/durable"
)

// InstanceFile is the file in data_dir that holds the instance id.
const InstanceFile = "instance-id"

// InstanceID returns this Tollgate's instance id, kept in
// <dataDir>/instance-id: read if the file exists (an operator may write
// it), else made once from the host name and 8 random hex digits, written
// and fsync'd. It names the instance in the usage ledger (and is meant for
// cluster mode too): it survives restarts, and a data_dir copied to
// another host takes it along.
func InstanceID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, InstanceFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if err := validInstanceID(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id, err := newInstanceID()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dataDir, ".instance-id-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// A link, not a rename: two instances starting on one data_dir at
	// once agree on the first id written.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return InstanceID(dataDir)
		}
		return "", err
	}
	if err := durable.SyncDir(dataDir); err != nil {
		return "", err
	}
	return id, nil
}

func newInstanceID() (string, error) {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if b.Len() >= 40 {
			break
		}
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else if r == '.' {
			break // the short host name
		}
	}
	if b.Len() == 0 {
		b.WriteString("tollgate")
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return b.String() + "-" + hex.EncodeToString(rnd[:]), nil
}

// validInstanceID accepts 1-128 characters of [A-Za-z0-9._-].
func validInstanceID(id string) error {
	if id == "" {
		return errors.New("the instance id is empty")
	}
	if len(id) > 128 {
		return errors.New("the instance id is longer than 128 characters")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("the instance id has the character %q: use [A-Za-z0-9._-]", c)
		}
	}
	return nil
}
