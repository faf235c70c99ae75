package auth

import "testing"

// testStore has alice/alice-secret and bob/bob-secret with both SCRAM
// mechanisms, and a user with only SCRAM-SHA-256.
func testStore(t testing.TB) *MemoryStore {
	t.Helper()
	m := NewMemoryStore()
	for user, pw := range map[string]string{"alice": "alice-secret", "bob": "bob-secret", "we=ird,name": "pw,with=odd chars"} {
		if err := m.SetPassword(user, pw, 0); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewScramCredential(MechanismScramSHA256, "only-256", 8192)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetScram("carol", c); err != nil {
		t.Fatal(err)
	}
	return m
}
