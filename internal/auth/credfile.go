package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// CredentialFile is the YAML credential file used when there is no durable
// store. It holds no plaintext: SCRAM credentials in Kafka's string form
// and API key hashes.
//
//	users:
//	  - name: alice
//	    scram:
//	      SCRAM-SHA-256: salt=...,stored_key=...,server_key=...,iterations=4096
//	      SCRAM-SHA-512: salt=...,stored_key=...,server_key=...,iterations=4096
//	api_keys:
//	  - id: 3xq7...
//	    identity: team-a
//	    sha256: 9f86d0...
//	    created: 2025-01-02T03:04:05Z
//	    revoked: false
type CredentialFile struct {
	Users   []CredentialFileUser   `yaml:"users"`
	APIKeys []CredentialFileAPIKey `yaml:"api_keys,omitempty"`
}

// CredentialFileUser is one user: mechanism → Kafka credential string
// (ScramCredential.Format).
type CredentialFileUser struct {
	Name  string            `yaml:"name"`
	Scram map[string]string `yaml:"scram"`
}

// CredentialFileAPIKey is one API key; SHA256 is the hex hash of the
// plaintext.
type CredentialFileAPIKey struct {
	ID       string    `yaml:"id"`
	Identity string    `yaml:"identity"`
	SHA256   string    `yaml:"sha256"`
	Created  time.Time `yaml:"created,omitempty"`
	Revoked  bool      `yaml:"revoked,omitempty"`
}

// NewCredentialFileUser makes a file entry for name with fresh
// SCRAM-SHA-256 and SCRAM-SHA-512 credentials from password (iterations 0:
// DefaultIterations). The password itself is not kept.
func NewCredentialFileUser(name, password string, iterations int) (CredentialFileUser, error) {
	if name == "" || name == APIKeyUser {
		return CredentialFileUser{}, fmt.Errorf("auth: invalid user name %q", name)
	}
	u := CredentialFileUser{Name: name, Scram: map[string]string{}}
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		c, err := NewScramCredential(mech, password, iterations)
		if err != nil {
			return CredentialFileUser{}, err
		}
		u.Scram[mech] = c.Format()
	}
	return u, nil
}

// NewCredentialFileAPIKey is the file entry for a stored key.
func NewCredentialFileAPIKey(k APIKey) CredentialFileAPIKey {
	return CredentialFileAPIKey{ID: k.ID, Identity: k.Identity, SHA256: hex.EncodeToString(k.Hash), Created: k.Created, Revoked: k.Revoked}
}

// Marshal renders the file as YAML.
func (f CredentialFile) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LoadCredentialFile reads and validates a credential file.
func LoadCredentialFile(path string) (*MemoryStore, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseCredentialFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseCredentialFile parses and validates credential-file YAML (unknown
// keys are errors) into a MemoryStore.
func ParseCredentialFile(data []byte) (*MemoryStore, error) {
	var f CredentialFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("auth: credential file: %w", err)
	}
	m := NewMemoryStore()
	for i, u := range f.Users {
		if _, dup := m.scram[u.Name]; dup {
			return nil, fmt.Errorf("auth: credential file: users[%d]: duplicate user %q", i, u.Name)
		}
		if len(u.Scram) == 0 {
			return nil, fmt.Errorf("auth: credential file: users[%d] (%q): no credentials", i, u.Name)
		}
		mechs := make([]string, 0, len(u.Scram))
		for mech := range u.Scram {
			mechs = append(mechs, mech)
		}
		slices.Sort(mechs)
		for _, mech := range mechs {
			c, err := ParseScramCredential(mech, u.Scram[mech])
			if err != nil {
				return nil, fmt.Errorf("auth: credential file: users[%d] (%q) %s: %w", i, u.Name, mech, err)
			}
			if err := m.SetScram(u.Name, c); err != nil {
				return nil, fmt.Errorf("auth: credential file: users[%d] (%q): %w", i, u.Name, err)
			}
		}
	}
	for i, e := range f.APIKeys {
		h, err := hex.DecodeString(e.SHA256)
		if err != nil {
			return nil, fmt.Errorf("auth: credential file: api_keys[%d]: sha256: %w", i, err)
		}
		k := APIKey{ID: e.ID, Identity: e.Identity, Hash: h, Created: e.Created, Revoked: e.Revoked}
		if err := m.AddAPIKey(k); err != nil {
			return nil, fmt.Errorf("auth: credential file: api_keys[%d]: %w", i, err)
		}
	}
	return m, nil
}
