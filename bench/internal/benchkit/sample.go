package benchkit

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/testkit/proc"
)

// RSSKiB returns process pid's resident set (VmRSS) in KiB, or an error if
// it cannot be read.
func RSSKiB(pid int) (int64, error) { return proc.RSSKiB(pid) }

// OpenFDs returns how many descriptors process pid holds open.
func OpenFDs(pid int) (int, error) { return proc.OpenFDs(pid) }

// Scrape reads the admin port's /metrics (admin is host:port) and returns
// the value of each sample, keyed by its name and labels as written
// ("go_goroutines", `tollgate_connections_active{listener="PLAINTEXT"}`).
func Scrape(admin string) (map[string]float64, error) {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, nil
}
