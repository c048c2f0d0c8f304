package core

// engines are the functions that return the engine behind a lock handle
// of one of the public packages (see RegisterHandle).
var engines []func(any) (*Lock, bool)

// RegisterHandle is called in the init of each package of lock handles,
// once per handle type H (a pointer type), with the function that returns
// the engine behind a handle of that type. A nil handle has none.
func RegisterHandle[H comparable](engine func(H) *Lock) {
	engines = append(engines, func(v any) (*Lock, bool) {
		var none H
		h, ok := v.(H)
		if !ok || h == none {
			return nil, false
		}
		return engine(h), true
	})
}

// LockOf returns the engine behind v, a lock handle of one of rlock's
// packages, and whether v was one.
func LockOf(v any) (*Lock, bool) {
	for _, f := range engines {
		if l, ok := f(v); ok && l != nil {
			return l, true
		}
	}
	return nil, false
}

// Runner returns, for a combinator over the lock handle v, the function
// that runs work of its own (a member's attempt or release) on one of the
// background workers of v's client: a parked goroutine whose stack has
// grown to what a script call needs already, which costs a fraction of a
// new goroutine's start and stack growth (several µs each). The work
// counts as background work that Close waits for. The function reports
// false, running nothing, once the client is closing; Runner returns nil
// when v is not one of rlock's handles. Either way the caller then runs
// the work in a goroutine of its own.
func Runner(v any) func(f func()) bool {
	l, ok := LockOf(v)
	if !ok {
		return nil
	}
	return l.c.goBackground
}
