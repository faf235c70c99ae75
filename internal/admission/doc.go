// Package admission owns Tollgate's connection admission: the pure logic of
// Kafka's connection quotas (KIP-402 counts and KIP-612 creation rates) that a
// listener's accept loop consults for every new TCP connection.
//
// It owns the gateway-wide, per-listener and per-IP connection counts, the
// connection-creation rate sensors (Kafka ≥ 3.8 sampled-rate algorithm and
// throttle formula, capped at one quota window), the exempt-listener rules,
// live settings changes, least-recently-used shedding when max.connections is
// lowered, and the metric numbers (AcceptorBlockedPercent, accept rates,
// throttle and reject counters, bounded per-IP counters).
//
// Comments cite sections of the project's Kafka quotas spec (kafka-quotas.md,
// e.g. §5.2 for the acceptor's procedure); the facts the tests rely on are
// copied into the tests as tables, never read from the spec.
//
// It deliberately owns nothing else: no sockets, no goroutines, no timers and
// no clock. Every time is passed in, and waiting, parking and closing are left
// to the network code, which keeps the package deterministic to test. It must
// import nothing from this project (only the standard library), so that the
// wire, proxy and config packages can all depend on it without cycles.
//
// The accept loop of one listener calls, for each socket the OS accepted:
//
//	t, err := lim.Admit(listener, time.Now())      // §5.2 step 1: rates, recorded at arrival
//	for {
//		now := time.Now()
//		d := lim.AdmitIP(&t, peerIP, &conn.adm, now) // slot wait, then steps 2–4
//		switch d.Verdict {
//		case admission.Wait:   // block this acceptor: sleep to d.Until, or until d.Wake closes
//			continue
//		case admission.Accept: // hand over; call conn.adm.Touch on activity, lim.Release on close
//		case admission.Park:   // keep the socket unserved, close it once past d.Until
//		case admission.Reject: // close now
//		}
//		break
//	}
//
// A separate goroutine loops on Shed and ShedSignal to close connections when
// the gateway is over max.connections.
package admission
