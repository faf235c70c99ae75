package kafka

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// The Kafka lines the test kit runs: the newest 4.x, and 3.9, the last line
// older clusters run (ZooKeeper's last, KRaft already). Versions lists them
// newest first; TOLLGATE_KAFKA_VERSION picks the one a test binary starts.
var Versions = []string{"4.4.0", "3.9.2"}

// DefaultVersion is the line a test binary starts when
// TOLLGATE_KAFKA_VERSION is not set.
func DefaultVersion() string {
	if v := os.Getenv("TOLLGATE_KAFKA_VERSION"); v != "" {
		return v
	}
	return Versions[0]
}

// CacheDir is where the classpaths are kept: $TOLLGATE_KAFKA_CACHE, or
// tollgate-test under the user's cache directory (beside the Python and
// JavaScript clients scripts/test.sh installs), outside the repository.
func CacheDir() string {
	if d := os.Getenv("TOLLGATE_KAFKA_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "tollgate-test")
}

// complete marks a classpath directory whose copy finished.
const complete = ".tollgate-complete"

// Classpath returns the directory holding version's jars (kafka_2.13,
// kafka-tools, kafka-clients and what they need), copying them from Maven
// Central with this package's pom.xml the first time. Concurrent test
// binaries wait for one copy (a lock file beside it). The error says what
// failed and how to run the copy by hand.
func Classpath(version string) (string, error) {
	dir := filepath.Join(CacheDir(), "kafka-"+version)
	if _, err := os.Stat(filepath.Join(dir, complete)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, complete)); err == nil {
		return dir, nil // another binary copied it meanwhile
	}
	pom, err := pomPath()
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("the real Kafka's jars are not in " + dir + " and mvn is not installed: install Maven (and Java 17+), or run ./scripts/test.sh, which fetches them")
	}
	os.RemoveAll(dir)
	args := []string{"-q", "-B", "-f", pom, "-Dkafka.version=" + version,
		"dependency:copy-dependencies", "-DoutputDirectory=" + dir}
	if strings.HasPrefix(version, "3.") {
		args = append(args, "-Dkafka3")
	}
	cmd := exec.Command("mvn", args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("fetching Apache Kafka %s's jars from Maven Central failed (mvn %s): %v\n%s",
			version, strings.Join(args, " "), err, tail(string(out), 40))
	}
	if err := os.WriteFile(filepath.Join(dir, complete), []byte(time.Since(start).Round(time.Second).String()+"\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// pomPath is this package's pom.xml, found from the source file's place
// (tests run from their own package's directory, not this one).
func pomPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find the test kit's pom.xml")
	}
	p := filepath.Join(filepath.Dir(file), "pom.xml")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the test kit's pom.xml: %w", err)
	}
	return p, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// javaBin is the java to run: $JAVA_HOME/bin/java, or java on the PATH.
func javaBin() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", errors.New("java is not installed: the real Kafka cluster needs Java 17 or newer")
	}
	return p, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
