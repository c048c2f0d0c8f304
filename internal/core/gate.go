package core

import (
	"context"
	"sync"
)

// Gate orders the goroutines that share one handle's own owner, the way a
// sync.RWMutex orders goroutines: an exclusive pass (the reentrant and
// fair locks, the write side, a MultiLock) lets one caller at a time
// through to Redis; shared passes (the read side) let any number through
// while no exclusive pass is held or waited for. Waiters pass in arrival
// order, and a waiting exclusive caller keeps new shared ones out.
//
// The server cannot tell these goroutines apart: they are one owner, so
// without the gate a second goroutine's Lock would re-enter the first's
// holding. A caller that holds already re-enters on purpose by calling
// with a ctx that descends from the holding's Ctx (see Reenters), which
// skips the gate.
//
// depth counts the exclusive holds granted through the gate and shares
// the shared ones (each Lock that succeeded, less each Unlock), so the
// gate opens again after as many Unlocks as Locks, whoever calls them, as
// with sync.Mutex.
type Gate struct {
	mu     sync.Mutex
	busy   bool // an exclusive pass is out: entering, or held (depth > 0)
	depth  int  // exclusive holds
	shares int  // shared passes out: entering or held
	queue  []*gateWaiter
}

type gateWaiter struct {
	exclusive bool
	ready     chan struct{} // closed when the pass is granted
	granted   bool          // guarded by Gate.mu
}

// NewGate returns an open gate.
func NewGate() *Gate { return &Gate{} }

// Enter takes a pass, waiting for it when wait is set; without wait it
// reports false at once when the pass is not free. It returns ctx's error,
// holding no pass, when ctx ends first.
func (g *Gate) Enter(ctx context.Context, exclusive, wait bool) (bool, error) {
	g.mu.Lock()
	if len(g.queue) == 0 && g.free(exclusive) {
		g.take(exclusive)
		g.mu.Unlock()
		return true, nil
	}
	if !wait {
		g.mu.Unlock()
		return false, nil
	}
	w := &gateWaiter{exclusive: exclusive, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return true, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted { // granted as ctx ended: give the pass back
		g.leaveLocked(exclusive)
	} else {
		for i, q := range g.queue {
			if q == w {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
		g.wakeLocked() // a shared waiter may have waited behind w only
	}
	return false, ctx.Err()
}

func (g *Gate) free(exclusive bool) bool {
	if exclusive {
		return !g.busy && g.shares == 0
	}
	return !g.busy
}

func (g *Gate) take(exclusive bool) {
	if exclusive {
		g.busy = true
	} else {
		g.shares++
	}
}

// Leave gives back a pass that Enter took and that was not granted (the
// Lock behind it failed).
func (g *Gate) Leave(exclusive bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaveLocked(exclusive)
}

func (g *Gate) leaveLocked(exclusive bool) {
	if exclusive {
		if g.depth == 0 {
			g.busy = false
		}
	} else if g.shares > 0 {
		g.shares--
	}
	g.wakeLocked()
}

// Granted records a hold obtained: through a pass Enter took, or by a
// re-entry (reentry set), which took none.
func (g *Gate) Granted(exclusive, reentry bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if exclusive {
		g.busy = true
		g.depth++
	} else if reentry {
		g.shares++
	}
}

// Released records one Unlock: the gate opens once every hold granted
// through it or by re-entry was released.
func (g *Gate) Released(exclusive bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if exclusive {
		if g.depth == 0 {
			return
		}
		g.depth--
		if g.depth > 0 {
			return
		}
		g.busy = false
	} else {
		if g.shares == 0 {
			return
		}
		g.shares--
	}
	g.wakeLocked()
}

// wakeLocked grants passes to the waiters at the head of the queue for as
// long as they are free: one exclusive waiter, or every shared waiter up
// to the first exclusive one.
func (g *Gate) wakeLocked() {
	for len(g.queue) > 0 {
		w := g.queue[0]
		if !g.free(w.exclusive) {
			return
		}
		g.queue = g.queue[1:]
		g.take(w.exclusive)
		w.granted = true
		close(w.ready)
	}
}
