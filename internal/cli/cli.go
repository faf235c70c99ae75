package cli

import (
	"context"
	"io"
	"os"
	"time"
)

// Env is what a command reads and writes; tests substitute every part.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// IsTerminal reports whether Stdin is an interactive terminal (quotas
	// apply asks for confirmation only there).
	IsTerminal func() bool
	// Timeout bounds one command's work against the cluster (default 60s).
	Timeout time.Duration
	// Getenv reads the environment (nil: nothing is set).
	Getenv func(string) string
}

func (e *Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

func (e *Env) timeout() time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return 60 * time.Second
}

func (e *Env) isTerminal() bool { return e.IsTerminal != nil && e.IsTerminal() }

func osEnv(stdout, stderr io.Writer) *Env {
	return &Env{
		Stdin:      os.Stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		IsTerminal: func() bool { return isTerminal(os.Stdin) },
		Getenv:     os.Getenv,
	}
}

// Configs is `tollgate configs`: kafka-configs.sh for client quotas.
func Configs(args []string, stdout, stderr io.Writer) int {
	return runConfigs(context.Background(), osEnv(stdout, stderr), args)
}

// Quotas is `tollgate quotas apply|resolve`.
func Quotas(args []string, stdout, stderr io.Writer) int {
	return runQuotas(context.Background(), osEnv(stdout, stderr), args)
}
