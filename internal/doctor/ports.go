package doctor

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

type port struct {
	addr, what string
	host       string
	num        int
}

// wantedPorts lists every address Tollgate will listen on: each listener's
// bootstrap, its broker ports (broker_port_base + node id, for the brokers
// known), and the admin port. Port 0 (any free port) is left out.
func (r *runner) wantedPorts() ([]port, []string) {
	var ps []port
	var notes []string
	add := func(host string, num int, what string) {
		if num == 0 {
			return
		}
		ps = append(ps, port{addr: net.JoinHostPort(host, strconv.Itoa(num)), what: what, host: host, num: num})
	}
	for _, l := range r.t.Listeners {
		host, p, err := net.SplitHostPort(l.Bootstrap)
		if err != nil {
			continue // the config loader refuses it first
		}
		n, _ := strconv.Atoi(p)
		add(host, n, "listener "+l.Name+" bootstrap")
		if l.BrokerPortBase <= 0 {
			continue
		}
		if r.brokers == nil {
			notes = append(notes, "broker ports of listener "+l.Name+" not checked (upstream unknown)")
			continue
		}
		for _, b := range r.brokers {
			add(host, l.BrokerPortBase+int(b.ID), fmt.Sprintf("listener %s broker %d", l.Name, b.ID))
		}
	}
	if r.t.HTTPAddress != "" {
		if host, p, err := net.SplitHostPort(r.t.HTTPAddress); err == nil {
			n, _ := strconv.Atoi(p)
			add(host, n, "admin HTTP port")
		}
	}
	return ps, notes
}

func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// ports: every configured port is free, valid, and configured once.
func (r *runner) ports() Result {
	res := Result{Check: "ports"}
	ps, notes := r.wantedPorts()
	var problems, fixes []string
	fix := func(s string) {
		if !slices.Contains(fixes, s) {
			fixes = append(fixes, s)
		}
	}
	for i, p := range ps {
		if p.num > 65535 {
			problems = append(problems, fmt.Sprintf("%s: port %d is beyond 65535", p.what, p.num))
			fix("lower broker_port_base so that broker_port_base + the highest node id stays below 65536")
			continue
		}
		clash := false
		for _, q := range ps[:i] {
			if q.num == p.num && (q.host == p.host || wildcard(q.host) || wildcard(p.host)) {
				problems = append(problems, fmt.Sprintf("%s and %s both use %s", q.what, p.what, p.addr))
				fix("give each listener's bootstrap, its broker port range and http.address distinct ports")
				clash = true
				break
			}
		}
		if clash {
			continue
		}
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			ln.Close()
			continue
		}
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			problems = append(problems, fmt.Sprintf("%s %s is in use", p.what, p.addr))
			fix("stop what listens there (find it with: ss -ltnp 'sport = :PORT') or move Tollgate's port; another Tollgate on this host needs its own ports")
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			problems = append(problems, fmt.Sprintf("%s %s: %s is not an address of this host", p.what, p.addr, p.host))
			fix("listen on an address of this host (or 0.0.0.0) and put the name clients use in advertised_host")
		case errors.Is(err, syscall.EACCES):
			problems = append(problems, fmt.Sprintf("%s %s: permission denied", p.what, p.addr))
			fix("use ports above 1023, or grant CAP_NET_BIND_SERVICE (systemd: AmbientCapabilities=CAP_NET_BIND_SERVICE)")
		default:
			problems = append(problems, fmt.Sprintf("%s %s: %v", p.what, p.addr, err))
			fix("check the address in the config")
		}
	}
	if len(problems) > 0 {
		res.Status = Fail
		res.Detail = strings.Join(append(problems, notes...), "; ")
		res.Fix = strings.Join(fixes, "; ")
		return res
	}
	addrs := make([]string, len(ps))
	for i, p := range ps {
		addrs[i] = p.addr
	}
	res.Detail = fmt.Sprintf("%d free: %s", len(ps), strings.Join(addrs, ", "))
	if len(ps) == 0 {
		res.Detail = "every port is chosen at start (port 0)"
	}
	if len(notes) > 0 {
		res.Status = Warn
		res.Detail += "; " + strings.Join(notes, "; ")
		res.Fix = "fix the upstream check first"
	}
	return res
}
