// Package fence orders a combinator's background releases before the same
// owner's next attempt on the same member, so that a release that is still
// in flight can never undo a newer grant of that owner.
package fence

import (
	"context"
	"sync"
	"sync/atomic"
)

// Key names one owner's holds on one member of one combinator.
type Key struct {
	Owner  string
	Member int
}

// Fence tracks the releases in flight, by key. The zero Fence is ready.
type Fence struct {
	mu      sync.Mutex
	pending map[Key]chan struct{}
}

// inFlight counts the releases in flight in the process, for tests.
var inFlight atomic.Int64

// InFlight returns how many background releases are still running in the
// process (tests wait for none before inspecting the servers).
func InFlight() int { return int(inFlight.Load()) }

// Wait returns once no release of k is in flight, or ctx's error if ctx
// ends first.
func (f *Fence) Wait(ctx context.Context, k Key) error {
	f.mu.Lock()
	p := f.pending[k]
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release runs release in the background, after any earlier release of k,
// and returns a channel closed when it is done. Until then Wait(k) waits.
func (f *Fence) Release(k Key, release func()) <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.pending == nil {
		f.pending = make(map[Key]chan struct{})
	}
	prev := f.pending[k]
	f.pending[k] = ch
	f.mu.Unlock()
	inFlight.Add(1)
	go func() {
		defer close(ch)
		defer inFlight.Add(-1)
		if prev != nil {
			<-prev
		}
		release()
		f.mu.Lock()
		if f.pending[k] == ch {
			delete(f.pending, k)
		}
		f.mu.Unlock()
	}()
	return ch
}
