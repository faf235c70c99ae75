package doctor

import (
	"fmt"

	"github.com/tollgate/tollgate/internal/admission"
)

// RequiredOpenFiles is the file descriptors a gateway needs to hold conns
// client connections: each client connection has its own upstream
// connection (sessions are 1:1), so two descriptors each; the metadata and
// audit clients may hold up to four connections per broker; each listening
// port has its socket and its end of the acceptor helper's socket pair; and
// 64 more cover the store, the audit log, the admin port's connections, the
// helper's control socket, epoll and standard streams. Connections held
// back by connection_creation_rate are parked in the acceptor helper, a
// process with its own limit.
func RequiredOpenFiles(conns, brokers, listeningPorts int) uint64 {
	return 2*uint64(conns) + 4*uint64(brokers) + 2*uint64(listeningPorts) + 64
}

// MaxConnections is the most client connections the settings admit:
// max.connections, or less when the listener limits of the non-exempt
// listeners add up to less, plus what exempt listeners may hold beyond it
// (their own listener limit). ok is false when nothing bounds it.
func MaxConnections(s admission.Settings) (n int, ok bool) {
	const unlimited = admission.Unlimited
	add := func(a, b int) int { // saturating
		if a >= unlimited-b {
			return unlimited
		}
		return a + b
	}
	if len(s.Listeners) == 0 {
		return s.MaxConnections, s.MaxConnections < unlimited
	}
	exemptApplies := len(s.Listeners) > 1 // as in Kafka
	var regular, exempt int
	anyRegular := false
	for _, l := range s.Listeners {
		lim := l.MaxConnections
		if lim <= 0 {
			lim = unlimited
		}
		if l.Exempt && exemptApplies {
			exempt = add(exempt, lim)
		} else {
			regular = add(regular, lim)
			anyRegular = true
		}
	}
	if anyRegular {
		regular = min(regular, s.MaxConnections)
	}
	n = add(regular, exempt)
	return n, n < unlimited
}

// openFiles: the open-files limit covers max.connections with their
// upstream connections.
func (r *runner) openFiles() Result {
	res := Result{Check: "open files"}
	limit, err := r.t.OpenFilesLimit()
	if err != nil {
		res.Status, res.Detail = Warn, "could not read RLIMIT_NOFILE: "+err.Error()
		res.Fix = "check ulimit -n by hand"
		return res
	}
	brokers := len(r.brokers)
	ports := len(r.t.Listeners) * (1 + brokers)
	if r.t.HTTPAddress != "" {
		ports++
	}
	overhead := RequiredOpenFiles(0, brokers, ports)
	conns, bounded := MaxConnections(r.t.Admission)
	if !bounded {
		most := uint64(0)
		if limit > overhead {
			most = (limit - overhead) / 2
		}
		res.Status = Warn
		res.Detail = fmt.Sprintf("max.connections is not set: the open-files limit (%d) is the only bound, about %d client connections; past it accepts fail", limit, most)
		res.Fix = fmt.Sprintf("set broker_configs max.connections (at most %d with this limit) so that excess clients are refused the Kafka way", most)
		return res
	}
	need := RequiredOpenFiles(conns, brokers, ports)
	detail := fmt.Sprintf("limit %d, need %d = 2 × %d connections (client + upstream) + %d (brokers %d, listening ports %d, fixed 64)", limit, need, conns, overhead, brokers, ports)
	if limit < need {
		res.Status = Fail
		res.Detail = detail
		res.Fix = fmt.Sprintf("raise the open-files limit to at least %d (systemd: LimitNOFILE=%d; shell: ulimit -n %d), or lower max.connections to %d", need, need, need, (max(limit, overhead)-overhead)/2)
		return res
	}
	res.Detail = detail
	return res
}
