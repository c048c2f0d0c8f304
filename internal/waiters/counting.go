package waiters

import "strconv"

// Counting channels carry a semaphore's counts (Redisson's redisson_sc
// channels): every message is the number of permits available (or
// released), never a designation and never an unlock message.

// JoinCounting is Join for a counting channel: a message on it wakes as
// many of the channel's waiters as it counts permits (at least one for a
// payload that is not a number; none for 0 or less), the longest-waiting
// first.
func (h *Hub) JoinCounting(channel string) (*Waiter, bool) {
	w, ok := h.Join(channel)
	if !ok {
		return nil, false
	}
	h.mu.Lock()
	w.topic.counting = true
	h.mu.Unlock()
	return w, true
}

// countingLocked handles a message on a counting topic. h.mu must be held.
func (h *Hub) countingLocked(t *topic, payload string) {
	if len(t.waiters) == 0 {
		t.missed = true
		return
	}
	n, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		n = 1
	}
	for ; n > 0; n-- {
		if t.wakeOne(nil) == nil {
			return
		}
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
