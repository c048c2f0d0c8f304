package latch

import (
	"sync"

	"github.com/rlock-go/rlock/internal/waiters"
)

// The waiters of one latch on one client share what one of them found.
// A "0" message wakes one waiter of the client, which looks at the count
// (a GET); when it finds none it wakes the others, and every other that
// joined before that look was sent returns on it instead of looking
// again: the count reached zero while it waited. A waiter that joined
// later (a new count may have been set) looks for itself.

type looksKey struct {
	hub     *waiters.Hub
	channel string
}

// looks numbers the Await calls of one latch on one client as they join,
// and remembers below which number a look found no count.
type looks struct {
	key   looksKey
	users int // Await calls using it; guarded by looksMu
	mu    sync.Mutex
	joins uint64 // Await calls numbered so far
	zero  uint64 // the calls numbered below it joined before a look found no count
}

var (
	looksMu  sync.Mutex
	looksFor = map[looksKey]*looks{}
)

// joinLooks returns the record of channel on hub and the caller's number.
func joinLooks(hub *waiters.Hub, channel string) (*looks, uint64) {
	k := looksKey{hub, channel}
	looksMu.Lock()
	lk := looksFor[k]
	if lk == nil {
		lk = &looks{key: k}
		looksFor[k] = lk
	}
	lk.users++
	looksMu.Unlock()
	lk.mu.Lock()
	defer lk.mu.Unlock()
	n := lk.joins
	lk.joins++
	return lk, n
}

// leave drops the caller's use of the record; the last one removes it.
func (lk *looks) leave() {
	looksMu.Lock()
	defer looksMu.Unlock()
	if lk.users--; lk.users == 0 {
		delete(looksFor, lk.key)
	}
}

// joined returns how many calls have joined, to take before a look.
func (lk *looks) joined() uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.joins
}

// foundZero records that a look sent after joins calls had joined found
// no count.
func (lk *looks) foundZero(joins uint64) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.zero = max(lk.zero, joins)
}

// released reports whether call n joined before a look that found no
// count.
func (lk *looks) released(n uint64) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return n < lk.zero
}
