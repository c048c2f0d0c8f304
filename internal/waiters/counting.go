package waiters

import "strconv"

// Counting channels carry a semaphore's counts (Redisson's redisson_sc
// channels): every message is the number of permits available (or
// released), or, from rlock's release scripts, a designation just before
// the count (see CountingDesignation); never an unlock message.

// JoinCounting is Join for a counting channel. A count message that
// follows designations wakes as many of the channel's waiters as the
// designations named this client (at most the count; none when they named
// only other clients); an undesignated count message (Redisson's, or one
// with no rlock client registered) wakes as many as it counts permits (at
// least one for a payload that is not a number; none for 0 or less):
// distinct waiters with no wake-up pending, the longest-waiting first.
// When designations of this client find fewer waiters to wake than they
// name (its waiters left, or every one is about to try already), wasted,
// if not nil, is called (under the hub's lock: it must not block) so that
// the client passes them on.
func (h *Hub) JoinCounting(channel string, wasted func()) (*Waiter, bool) {
	w, ok := h.Join(channel)
	if !ok {
		return nil, false
	}
	h.mu.Lock()
	w.topic.counting = true
	if wasted != nil {
		w.topic.semWaste = wasted
	}
	h.mu.Unlock()
	return w, true
}

// designationUnit is 2^32: a counting designation is a multiple of it, so
// that Redisson's semaphore listener, which wakes
// min(waiters, message.intValue()) of its waiters, reads it as 0 and
// wakes none (nor throws, as a negative int would).
const designationUnit = 1 << 32

// designationSpace bounds the multiplier, so that every designation stays
// below 2^53 (exact in a Lua number) and a Java long.
const designationSpace = 1<<21 - 1

// CountingDesignation returns the message that designates the client whose
// designation tag is tag (see Tag) on a counting channel: the decimal of
// m × 2^32, m in 1..2^21-1 derived from the tag. A semaphore waiter's
// refused attempt registers it; a release publishes one per waiter to wake
// before its count. Two clients whose m collide both act on it: an extra
// wake-up, never a lost one.
func CountingDesignation(tag string) string {
	return strconv.FormatInt(designationM(tag)*designationUnit, 10)
}

func designationM(tag string) int64 {
	n, err := strconv.ParseUint(tag, 10, 64)
	if err != nil {
		return 1
	}
	return int64(n%designationSpace) + 1
}

// countingDesignee returns the m of a designation message, or 0 for a
// count.
func countingDesignee(v int64) int64 {
	if v < designationUnit || v%designationUnit != 0 || v/designationUnit > designationSpace {
		return 0
	}
	return v / designationUnit
}

// countingLocked handles a message on a counting topic, heard on
// connection from. h.mu must be held.
func (h *Hub) countingLocked(t *topic, payload string, from int) {
	n, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		n = 1
	}
	if m := countingDesignee(n); m != 0 {
		t.semNamed[from] = true
		if h.tag != "" && m == designationM(h.tag) {
			t.semMine[from]++
		}
		return
	}
	designated := t.semNamed[from]
	if designated {
		n = min(n, t.semMine[from])
		t.semNamed[from], t.semMine[from] = false, 0
		if n <= 0 {
			return // designated for other clients
		}
	}
	if len(t.waiters) == 0 {
		t.missed = true
	}
	// n distinct waiters, the longest-waiting first: one parked on its
	// channel takes a wake-up at once and has none pending, so asking
	// wakeOne n times could wake it again instead of the next.
	for _, w := range t.waiters {
		if n <= 0 {
			break
		}
		if w.signal() {
			n--
		}
	}
	if designated && n > 0 && t.semWaste != nil {
		t.semWaste() // designations this client cannot use
	}
}

// WakeNext wakes the longest-waiting other waiter of w's channel that has
// no wake-up pending: a semaphore waiter granted its permits with more
// left over passes the news on. It never waits for I/O.
func (w *Waiter) WakeNext() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w.topic.wakeOne(w)
}

// Alone reports whether w is the only waiter of its channel in this hub:
// a semaphore waiter granted then takes its client off the semaphore's
// registry.
func (w *Waiter) Alone() bool {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(w.topic.waiters) == 1 && w.topic.waiters[0] == w
}
