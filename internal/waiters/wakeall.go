package waiters

// WakeOthers signals every other waiter of w's channel that has no
// wake-up pending. A message wakes one waiter per client (see the package
// doc); a count-down latch's waiter that finds the count at zero calls it
// so that the client's other waiters of the latch look too. It never
// waits for I/O.
func (w *Waiter) WakeOthers() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range w.topic.waiters {
		if x != w {
			x.signal()
		}
	}
}
