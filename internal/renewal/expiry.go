package renewal

import (
	"container/heap"
	"math"
	"time"
)

// The registered leases, and when each certainly runs out, are kept so that
// every operation costs O(1) per lease, or O(log c) for c cohorts:
//
//   - all holds every registered lease (a lease knows its index), for the
//     snapshot of a tick and for Registered;
//   - a cohort is the leases that run out at the same moment: the leases
//     one round renewed (they share the round's send time), or the leases
//     added within a millisecond of each other (the cohort runs out with
//     the earliest: never later than any member). A lease is in one
//     cohort, linked in its list;
//   - the cohorts are in a heap, the first to run out on top.
//
// A renewal moves a lease from its cohort to the round's: a few pointer
// writes, no heap operation per lease. The loop's timer waits for the top
// cohort; when it runs out, its whole list is reported.
//
// Cohorts only serve a lease until the first tick that carries it: that
// tick arms the lease's own timer (a runtime timer, not a goroutine), which
// takes over. The timer is set for the lease's until and, when it fires
// with until moved on by renewals meanwhile, is set again (so a renewed
// lease costs a timer firing per lease, not a timer operation per
// renewal); when it fires with until passed, it reports the loss from its
// own goroutine. Leases that run out together are so reported in parallel,
// each within the runtime's timer latency of its until, instead of one by
// one on the loop. A lease held for less than an interval never gets one.

// arm gives every lease of a tick that has none its timer, a chunk at a
// time under s.mu.
func (s *Scheduler) armAll(leases []*Lease) {
	for lo := 0; lo < len(leases); lo += applyChunk {
		s.mu.Lock()
		for _, l := range leases[lo:min(lo+applyChunk, len(leases))] {
			if l.pos >= 0 && l.timer.Load() == nil {
				s.leave(l)
				t := time.AfterFunc(time.Duration(math.MaxInt64), l.fire)
				l.timer.Store(t) // before it can fire
				t.Reset(time.Until(time.Unix(0, l.until.Load())))
			}
		}
		s.mu.Unlock()
	}
}

// fire is l's timer: it reports l lost if until has passed, or waits for
// until again. The registration ends before the report, as with any loss.
func (l *Lease) fire() {
	if l.over.Load() {
		return
	}
	if d := time.Until(time.Unix(0, l.until.Load())); d > 0 {
		l.timer.Load().Reset(d)
		return
	}
	if !l.over.CompareAndSwap(false, true) {
		return
	}
	// The registration ends under s.mu, but not by waiting for it here:
	// many leases that run out together would each wait their turn, and
	// a mutex many goroutines queue for hands itself over one by one,
	// starving the leases not reported yet. l is queued (lock-free), and
	// one goroutine at a time unregisters the queued leases; Stats does
	// too, so no lease reported lost counts as registered.
	s := l.s
	g := &goneEntry{l: l}
	for {
		g.next = s.goneQ.Load()
		if s.goneQ.CompareAndSwap(g.next, g) {
			break
		}
	}
	l.lost(l.ranOut())
	for s.goneQ.Load() != nil && s.draining.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.unregisterGone()
		s.mu.Unlock()
		s.draining.Store(false)
	}
}

// goneEntry is a lease whose timer reported it lost, to unregister.
type goneEntry struct {
	l    *Lease
	next *goneEntry
}

// unregisterGone unregisters the leases queued by their timers; s.mu must
// be held.
func (s *Scheduler) unregisterGone() {
	for g := s.goneQ.Swap(nil); g != nil; g = g.next {
		if g.l.pos >= 0 {
			s.unregister(g.l)
		}
		s.stats.Lost++
	}
}

// addMerge is how close an Add's expiry must be to the previous Add's
// cohort to join it.
const addMerge = time.Millisecond

// cohort is the leases that run out at expires.
type cohort struct {
	expires time.Time
	idx     int    // index in the heap; -1 when not in it
	head    *Lease // the members, doubly linked
	n       int
}

func newCohort(expires time.Time) *cohort { return &cohort{expires: expires, idx: -1} }

func (c *cohort) link(l *Lease) {
	l.c, l.prev, l.next = c, nil, c.head
	if c.head != nil {
		c.head.prev = l
	}
	c.head = l
	c.n++
}

func (c *cohort) unlink(l *Lease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		c.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	l.c, l.prev, l.next = nil, nil, nil
	c.n--
}

// cohortHeap orders cohorts by expiry, for container/heap.
type cohortHeap []*cohort

func (h cohortHeap) Len() int           { return len(h) }
func (h cohortHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h cohortHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *cohortHeap) Push(x any) {
	c := x.(*cohort)
	c.idx = len(*h)
	*h = append(*h, c)
}

func (h *cohortHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.idx = -1
	*h = old[:len(old)-1]
	return c
}

// The methods below are called with s.mu held.

// register adds l, which runs out at expires, and reports whether the
// first expiry is now earlier than before (the loop's timer may be late).
func (s *Scheduler) register(l *Lease, expires time.Time) bool {
	c := s.lastAdd
	earlier := false
	if c == nil || c.idx < 0 || expires.Before(c.expires) || expires.Sub(c.expires) > addMerge {
		if c != nil && c.idx < 0 && c.n == 0 {
			// The latest Add's cohort, emptied and out of the heap: only
			// lastAdd refers to it (see leave and popExpired), so it
			// serves again, sparing a lock held and released over and
			// over an allocation per Add.
			c.expires, c.head = expires, nil
		} else {
			c = newCohort(expires)
		}
		heap.Push(&s.cohorts, c)
		s.lastAdd = c
		earlier = c.idx == 0
	}
	l.pos = len(s.all)
	s.all = append(s.all, l)
	c.link(l)
	return earlier
}

// unregister removes l.
func (s *Scheduler) unregister(l *Lease) {
	s.drop(l)
	s.leave(l)
}

// moveTo puts l in c (a round's cohort), which joins the heap with its first
// member.
func (s *Scheduler) moveTo(l *Lease, c *cohort) {
	s.leave(l)
	if c.idx < 0 {
		heap.Push(&s.cohorts, c)
	}
	c.link(l)
}

// leave takes l out of its cohort, and an emptied cohort out of the heap.
func (s *Scheduler) leave(l *Lease) {
	c := l.c
	if c == nil {
		return
	}
	c.unlink(l)
	if c.n == 0 && c.idx >= 0 {
		heap.Remove(&s.cohorts, c.idx)
	}
}

// popExpired removes and returns every lease that has certainly run out at
// now.
func (s *Scheduler) popExpired(now time.Time) []*Lease {
	var gone []*Lease
	for len(s.cohorts) > 0 && !now.Before(s.cohorts[0].expires) {
		c := heap.Pop(&s.cohorts).(*cohort)
		for l := c.head; l != nil; {
			next := l.next
			l.c, l.prev, l.next = nil, nil, nil
			s.drop(l)
			gone = append(gone, l)
			l = next
		}
		c.head, c.n = nil, 0
	}
	return gone
}

// drop removes l from all.
func (s *Scheduler) drop(l *Lease) {
	last := s.all[len(s.all)-1]
	s.all[l.pos], last.pos = last, l.pos
	s.all[len(s.all)-1] = nil
	s.all = s.all[:len(s.all)-1]
	l.pos = -1
}

// firstExpiry returns when the first lease runs out, if any is registered.
func (s *Scheduler) firstExpiry() (time.Time, bool) {
	if len(s.cohorts) == 0 {
		return time.Time{}, false
	}
	return s.cohorts[0].expires, true
}
