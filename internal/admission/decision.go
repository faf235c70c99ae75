package admission

import "time"

// Verdict is what the accept loop must do with a connection.
type Verdict uint8

const (
	_ Verdict = iota // the zero Decision is never returned
	// Accept: hand the connection over; it is counted and registered.
	Accept
	// Wait: accept nothing more on this listener until Decision.Until has
	// passed (rate throttle) or Decision.Wake is closed (no free slot), then
	// call AdmitIP again with the same ticket.
	Wait
	// Park: the per-IP rate was violated. Do not serve the socket; close it
	// once the clock is past Decision.Until. It is never accepted later
	// (Kafka's code, not KIP-612's text), and it is not counted.
	Park
	// Reject: close the socket at once (per-IP count, or the listener was
	// removed while the ticket waited).
	Reject
)

func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Wait:
		return "wait"
	case Park:
		return "park"
	case Reject:
		return "reject"
	}
	return "invalid"
}

// Reason names the limit behind a throttle, wait, park or reject. String gives
// the Kafka setting, which is what an operator will look for.
type Reason uint8

const (
	ReasonNone Reason = iota
	// ReasonGatewayRate: max.connection.creation.rate.
	ReasonGatewayRate
	// ReasonListenerRate: listener.name.<l>.max.connection.creation.rate.
	ReasonListenerRate
	// ReasonGatewayCount: max.connections.
	ReasonGatewayCount
	// ReasonListenerCount: listener.name.<l>.max.connections.
	ReasonListenerCount
	// ReasonIPRate: connection_creation_rate of the client's ip entity.
	ReasonIPRate
	// ReasonIPCount: max.connections.per.ip or its override.
	ReasonIPCount
	// ReasonListenerRemoved: Update removed the listener while a ticket for
	// it was outstanding.
	ReasonListenerRemoved
)

func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonGatewayRate:
		return "max.connection.creation.rate"
	case ReasonListenerRate:
		return "listener.name.<l>.max.connection.creation.rate"
	case ReasonGatewayCount:
		return "max.connections"
	case ReasonListenerCount:
		return "listener.name.<l>.max.connections"
	case ReasonIPRate:
		return "connection_creation_rate"
	case ReasonIPCount:
		return "max.connections.per.ip"
	case ReasonListenerRemoved:
		return "listener removed"
	}
	return "invalid"
}

// Decision is AdmitIP's answer.
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Until: for Wait on a rate, the earliest time to call AdmitIP again; for
	// Park, close the socket once the clock is past it. Zero otherwise.
	Until time.Time
	// Delay is the throttle behind Until (T for Wait, T_ip for Park).
	Delay time.Duration
	// Wake, for Wait on a count, is closed when a slot may have been freed
	// (a Release) or the settings changed. Nil otherwise.
	Wake <-chan struct{}
}

// Ticket carries one connection from Admit (§5.2 step 1: the gateway and
// listener rates, recorded at arrival) to AdmitIP (the slot wait and steps
// 2–4). It is a value the accept loop keeps on its stack; pass the same
// pointer to every AdmitIP retry. A ticket is finished once AdmitIP returns
// anything but Wait, or after Cancel.
type Ticket struct {
	ln         *listener
	start      time.Time // t0: when Admit recorded the connection
	until      time.Time // t0 + T
	throttle   time.Duration
	rateReason Reason

	blocked     bool      // currently counted as a blocked acceptor
	blockStart  time.Time //
	waitedCount bool      // the count wait was already counted in stats
	done        bool
}

// Throttle is T = max(T_gateway, T_listener), 0 if neither rate was violated.
func (t *Ticket) Throttle() time.Duration { return t.throttle }

// Until is t0 + T: the acceptor must not accept before it. A rate that is
// raised later does not move it (§5.6).
func (t *Ticket) Until() time.Time { return t.until }

// Listener is the listener name given to Admit.
func (t *Ticket) Listener() string {
	if t.ln == nil {
		return ""
	}
	return t.ln.name
}
