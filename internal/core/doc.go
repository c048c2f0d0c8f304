// Package core is the lock engine shared by the public lock packages: the
// client (client ID, waiter hub, watchdog, per-owner hold bookkeeping) and
// the lock handle engine for every kind (reentrant, fair). Packages
// reentrant and fair are thin, documented wrappers around it; fair reaches
// the engine behind a *reentrant.Client through Of, so every lock kind of a
// process shares one client, one pub/sub connection and one watchdog.
package core

var unwrap func(any) (*Client, bool)

// Register is called once, by package reentrant's init, with the function
// that returns the engine behind a *reentrant.Client.
func Register(f func(any) (*Client, bool)) { unwrap = f }

// Of returns the engine behind v, a *reentrant.Client, and whether v was
// one (a nil client is not).
func Of(v any) (*Client, bool) {
	if unwrap == nil {
		return nil, false
	}
	return unwrap(v)
}
