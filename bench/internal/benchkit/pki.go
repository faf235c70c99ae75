package benchkit

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// PKI makes a throwaway CA (testpki's, the tests' own) and a server
// certificate it signed for 127.0.0.1 and localhost, their files written in
// dir, which the caller removes.
func PKI(dir string) (ca *testpki.CA, server *testpki.Leaf, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("test PKI: %v", r)
		}
	}()
	t := commandTB{dir: dir}
	ca = testpki.NewCA(t, "tollgate-bench-ca")
	return ca, ca.Server(t, "tollgate-bench"), nil
}

// commandTB lets a command use testpki, which is written for tests: the
// three methods it calls are answered here (a failure panics, and PKI
// turns the panic into an error); the embedded nil interface is never
// called.
type commandTB struct {
	testing.TB
	dir string
}

func (commandTB) Helper()                      {}
func (t commandTB) TempDir() string            { return t.dir }
func (commandTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (commandTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
