package renewal

import (
	"container/heap"
	"sync"
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
// tick hands the lease to the watch (see below), which takes over. A lease
// held for less than an interval never gets there.
//
// The watch keeps the leases it has been handed in buckets by when they run
// out (their until rounded up to the next watchGrain), the buckets in a heap
// by that time, and one runtime timer for the first bucket. A renewal only
// moves until on (an atomic store): no bucket or heap operation. When a
// bucket comes due, the timer's goroutine takes it out and goes through
// it: a lease whose until moved on meanwhile joins the bucket of its new
// until (so a renewed lease costs one O(1) move per lease period, not an
// operation per renewal), and a lease whose until has passed is reported
// lost. A stopped lease leaves its bucket at once (unwatch), so a bucket
// holds no lease longer than it is registered.
//
// A due bucket of more than deliverShare leases is shared out among
// goroutines of deliverShare leases each. Before, every lease had a runtime
// timer of its own, each firing in a goroutine of its own: when thousands
// ran out together, the runtime created them all before the first ran (the
// first report came 0.1-0.2 s after until for 20,000-100,000 leases on a
// busy P), and on a starved CPU they queued behind the work that starves
// it. A few hundred goroutines that each report a few hundred losses in
// a fraction of a time slice start reporting within the timer's latency
// and get a larger share of a busy CPU than one goroutine would. They
// take no mutex for the leases that ran out: a goroutine preempted while
// holding one would stall all the others on a starved CPU.

// watchGrain is the watch's time resolution: a lease is reported at most
// this long after its until (plus the timer's latency and the CPU time of
// the reports before it).
const watchGrain = time.Millisecond

// deliverShare is how many leases of a due bucket one goroutine reports;
// deliverWorkers is how many goroutines one bucket gets at most.
const (
	deliverShare   = 256
	deliverWorkers = 1024
)

// watch is the leases handed over by the ticks, by when they run out.
type watch struct {
	mu      sync.Mutex
	buckets map[int64]*bucket // by at
	heap    bucketHeap
	timer   *time.Timer // fires at timerAt for deliverDue; nil before the first lease
	timerAt int64       // unix ns; 0 while not set
	closed  bool

	run sync.Mutex // held by due while it runs: one at a time
}

// bucket is the watched leases that run out by at (unix ns, a multiple of
// watchGrain).
type bucket struct {
	at     int64
	idx    int // in the heap; -1 once taken out to be delivered
	leases []*Lease
}

// bucketHeap orders buckets by at, for container/heap.
type bucketHeap []*bucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h bucketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *bucketHeap) Push(x any) {
	b := x.(*bucket)
	b.idx = len(*h)
	*h = append(*h, b)
}

func (h *bucketHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	b.idx = -1
	*h = old[:len(old)-1]
	return b
}

// armAll hands every lease of a tick not watched yet to the watch, a chunk
// at a time under s.mu.
func (s *Scheduler) armAll(leases []*Lease) {
	x := &s.watch
	for lo := 0; lo < len(leases); lo += applyChunk {
		s.mu.Lock()
		x.mu.Lock()
		for _, l := range leases[lo:min(lo+applyChunk, len(leases))] {
			if l.pos >= 0 && !l.armed.Load() && !x.closed {
				s.leave(l)
				l.armed.Store(true)
				s.watchLocked(l, l.until.Load())
			}
		}
		x.mu.Unlock()
		s.mu.Unlock()
	}
}

// watchLocked puts l in the bucket of until, and sets the timer earlier if
// that bucket is now the first; x.mu must be held.
func (s *Scheduler) watchLocked(l *Lease, until int64) {
	x := &s.watch
	g := int64(watchGrain)
	at := (until + g - 1) / g * g
	b := x.buckets[at]
	if b == nil {
		if x.buckets == nil {
			x.buckets = map[int64]*bucket{}
		}
		b = &bucket{at: at}
		x.buckets[at] = b
		heap.Push(&x.heap, b)
	}
	l.wb, l.wi = b, len(b.leases)
	b.leases = append(b.leases, l)
	if b.idx == 0 && (x.timerAt == 0 || at < x.timerAt) {
		s.setTimer(at)
	}
}

// setTimer sets the watch's timer for at (unix ns); s.watch.mu must be
// held.
func (s *Scheduler) setTimer(at int64) {
	x := &s.watch
	x.timerAt = at
	d := time.Until(time.Unix(0, at))
	if x.timer == nil {
		x.timer = time.AfterFunc(d, s.due)
		return
	}
	x.timer.Reset(d)
}

// unwatch takes l out of its bucket, and an emptied bucket out of the
// heap. A lease of a bucket being delivered stays in it: it is over (see
// end), so the delivery skips it.
func (s *Scheduler) unwatch(l *Lease) {
	x := &s.watch
	x.mu.Lock()
	defer x.mu.Unlock()
	b := l.wb
	if b == nil || b.idx < 0 {
		return
	}
	last := b.leases[len(b.leases)-1]
	b.leases[l.wi], last.wi = last, l.wi
	b.leases[len(b.leases)-1] = nil
	b.leases = b.leases[:len(b.leases)-1]
	l.wb = nil
	if len(b.leases) == 0 {
		heap.Remove(&x.heap, b.idx)
		delete(x.buckets, b.at)
	}
}

// closeWatch drops every watched lease (Close has ended them all, so a
// delivery in progress reports none of them).
func (s *Scheduler) closeWatch() {
	x := &s.watch
	x.mu.Lock()
	x.closed = true
	if x.timer != nil {
		x.timer.Stop()
	}
	x.buckets, x.heap, x.timerAt = nil, nil, 0
	x.mu.Unlock()
}

// due is the watch's timer: it delivers every bucket that has come due,
// then sets the timer for the next. Buckets due together (leases renewed
// by different rounds, or added apart) are delivered as one.
func (s *Scheduler) due() {
	x := &s.watch
	x.run.Lock()
	defer x.run.Unlock()
	var leases []*Lease
	var taken []*bucket
	for {
		now := time.Now().UnixNano()
		leases, taken = leases[:0], taken[:0]
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			return
		}
		x.timerAt = 0
		for len(x.heap) > 0 && x.heap[0].at <= now {
			b := heap.Pop(&x.heap).(*bucket)
			delete(x.buckets, b.at)
			leases = append(leases, b.leases...)
			taken = append(taken, b)
		}
		if len(leases) == 0 {
			if len(x.heap) > 0 {
				s.setTimer(x.heap[0].at)
			}
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
		s.deliver(leases)
		// A lease reported lost still points at its bucket (for unwatch,
		// which leaves it alone): the bucket must not keep the others.
		x.mu.Lock()
		for _, b := range taken {
			b.leases = nil
		}
		x.mu.Unlock()
		clear(leases)
		if s.goneQ.Load() != nil {
			s.mu.Lock()
			s.unregisterGone()
			s.mu.Unlock()
		}
	}
}

// deliver goes through leases taken out of the watch: a lease whose until
// moved on joins its new bucket, one whose until has passed is reported
// lost. More than deliverShare leases are shared out among goroutines.
func (s *Scheduler) deliver(leases []*Lease) {
	n := len(leases)
	if n <= deliverShare {
		s.deliverPart(leases)
		return
	}
	workers := min(deliverWorkers, (n+deliverShare-1)/deliverShare)
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := per; lo < n; lo += per {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.deliverPart(leases[lo:min(lo+per, n)])
		}()
	}
	s.deliverPart(leases[:min(per, n)])
	wg.Wait()
}

// deliverPart delivers part of the leases taken out of the watch, a chunk
// at a time. It takes s.watch.mu only for the leases whose until moved on
// (to put them in their new bucket): many deliverParts at once must not
// queue for it. The leases of a bucket taken out of the heap are its
// deliverer's own (unwatch leaves them alone).
func (s *Scheduler) deliverPart(part []*Lease) {
	x := &s.watch
	var gone, moved []*Lease
	for lo := 0; lo < len(part); lo += applyChunk {
		gone, moved = gone[:0], moved[:0]
		now := time.Now().UnixNano()
		for _, l := range part[lo:min(lo+applyChunk, len(part))] {
			switch {
			case l.over.Load():
			case l.until.Load() > now:
				moved = append(moved, l)
			default:
				gone = append(gone, l)
			}
		}
		if len(moved) > 0 {
			x.mu.Lock()
			for _, l := range moved {
				if !x.closed && !l.over.Load() {
					s.watchLocked(l, l.until.Load())
				}
			}
			x.mu.Unlock()
		}
		// The registrations end under s.mu, but not by waiting for it
		// here: the loop may hold it (for a whole tick's leases at a
		// time) and be preempted on a starved CPU. The leases are queued
		// (lock-free) before they are reported, and unregistered by the
		// next holder of s.mu that drains the queue (due, when it is
		// done, or Stats), so no lease reported lost counts as
		// registered.
		for _, l := range gone {
			if l.over.CompareAndSwap(false, true) {
				s.queueGone(l)
				l.lost(l.ranOut())
			}
		}
	}
}

// queueGone queues l, reported lost, to be unregistered.
func (s *Scheduler) queueGone(l *Lease) {
	g := &goneEntry{l: l}
	for {
		g.next = s.goneQ.Load()
		if s.goneQ.CompareAndSwap(g.next, g) {
			return
		}
	}
}

// goneEntry is a lease reported lost by the watch, to unregister.
type goneEntry struct {
	l    *Lease
	next *goneEntry
}

// unregisterGone unregisters the leases queued by queueGone and counts
// their losses; s.mu must be held.
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
