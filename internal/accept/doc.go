// Package accept is the accept side of the gateway: the listening ports
// (a bootstrap port and one port per upstream broker for each listener),
// their accept loops, Kafka's acceptor procedure at accept (admission:
// KIP-612 creation rates, KIP-402 counts, parked and rejected sockets),
// raw accept on Linux, the acceptor helper process, the PROXY protocol
// header, and the handover of every listening socket to a new process of
// a new binary (handover.go).
//
// It hands each admitted connection to the session side through Handler
// and knows nothing of sessions, the Kafka protocol or quotas. It must not
// import proxy, nor anything of the control side (control, store, audit,
// metrics, httpapi, app, cli).
package accept
