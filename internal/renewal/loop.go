package renewal

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rlock-go/rlock/internal/base"
)

// applyChunk is how many leases one hold of the scheduler's mutex updates
// when a round's replies are applied, so that Add and Stop never wait long.
const applyChunk = 1024

// loop is the scheduler's one timing goroutine: it dispatches rounds to
// nodes, applies their replies and reports leases that ran out. Its state
// is its own; what it shares with Add and Stop (the heap, the counters) is
// under s.mu. It exits when nothing is registered and no round is in
// flight (Add starts a new one), or on Close.
type loop struct {
	s        *Scheduler
	results  chan *round
	nodes    map[string]*node
	busy     int       // nodes with a round in flight
	nextTick time.Time // the next full round
	retry    []*Lease  // leases whose last round failed, resent at retryAt
	retryAt  time.Time
}

// node is one server's renewal state.
type node struct {
	id       string
	target   *target
	inFlight *round
	pending  []*Lease // sent as soon as the round in flight ends
	pendTick *tick    // the tick pending belongs to, if any
	ticked   *tick    // the last tick that had leases for it
	scripted bool     // the node answered the last round: it has the script
}

// tick is one full round over every registered lease, for Stats.
type tick struct {
	start time.Time
	open  int // node rounds not yet ended
}

func newLoop(s *Scheduler) *loop {
	return &loop{
		s:        s,
		results:  make(chan *round),
		nodes:    map[string]*node{},
		nextTick: time.Now().Add(s.interval),
	}
}

func (lp *loop) run() {
	s := lp.s
	defer s.wg.Done()
	timer := time.NewTimer(0) // a first lease may have run out already
	defer timer.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-s.wake:
		case r := <-lp.results:
			lp.finish(r, time.Now())
		case <-timer.C:
		}
		now := time.Now()
		lp.expire(now)
		lp.timeouts(now)
		if !now.Before(lp.nextTick) {
			lp.tick(now)
		}
		if len(lp.retry) > 0 && !now.Before(lp.retryAt) {
			lp.resend(now)
		}
		next, idle := lp.next()
		if idle {
			return
		}
		timer.Reset(time.Until(next))
	}
}

// next returns when the loop must wake next, or idle (and marks the loop
// gone) when nothing is registered and no round is in flight.
func (lp *loop) next() (time.Time, bool) {
	s := lp.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 && lp.busy == 0 {
		s.running = false
		return time.Time{}, true
	}
	next := lp.nextTick
	if first, ok := s.firstExpiry(); ok {
		next = earliest(next, first)
	}
	if len(lp.retry) > 0 {
		next = earliest(next, lp.retryAt)
	}
	for _, n := range lp.nodes {
		if r := n.inFlight; r != nil && !r.timedOut {
			next = earliest(next, r.deadline)
		}
	}
	s.wakeAt = next
	return next, false
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// expire reports the leases that have certainly run out: only those, taken
// from the top of the cohorts' heap.
func (lp *loop) expire(now time.Time) {
	s := lp.s
	s.mu.Lock()
	gone := s.popExpired(now)
	s.mu.Unlock()
	reported := 0
	for _, l := range gone {
		if l.over.CompareAndSwap(false, true) {
			l.lost(l.ranOut())
			reported++
		}
	}
	if reported > 0 {
		s.mu.Lock()
		s.stats.Lost += uint64(reported)
		s.mu.Unlock()
	}
}

// ranOut is the loss report of a lease that ran out, naming the cause.
func (l *Lease) ranOut() error {
	if err := l.lastErr.Load(); err != nil {
		return base.Lost(base.LossRenewalFailed, fmt.Errorf("%w: lease of %q ran out while renewal failed: %w", base.ErrLockLost, l.key, *err))
	}
	where := "its server"
	if n := l.node.Load(); n != nil && *n != "" {
		where = *n
	}
	return base.Lost(base.LossRenewalLate, fmt.Errorf("%w: lease of %q ran out before a renewal could reach %s", base.ErrLockLost, l.key, where))
}

// timeouts gives up waiting for the rounds in flight past their bound: their
// outcome is unknown, so their leases count as failed and are retried (on
// the same node only once the round in flight has ended).
func (lp *loop) timeouts(now time.Time) {
	for _, n := range lp.nodes {
		r := n.inFlight
		if r == nil || r.timedOut || now.Before(r.deadline) {
			continue
		}
		r.timedOut = true
		lp.failed(r, fmt.Errorf("renewal on %s: %w: no reply within %v", n.id, context.DeadlineExceeded, lp.s.interval), r.leases, now)
	}
}

// failed records that r's renewal of leases failed with err (or timed
// out): they are retried at the next retry time; a cluster reloads its
// slot map.
func (lp *loop) failed(r *round, err error, leases []*Lease, now time.Time) {
	s := lp.s
	if len(lp.retry) == 0 {
		lp.retryAt = now.Add(s.retry)
	}
	s.mu.Lock()
	if r.timedOut {
		s.stats.Timeouts++
	} else {
		s.stats.Errors++
	}
	perr := &err
	for _, l := range leases {
		// Not if it is gone, or renewed by a later round (elsewhere).
		if l.pos >= 0 && l.base.Before(r.started) {
			l.lastErr.Store(perr)
			lp.retry = append(lp.retry, l)
		}
	}
	s.mu.Unlock()
	r.target.failed()
	// One line per round: it names the first lock, and how many it carried.
	var lock, owner string
	if len(leases) > 0 {
		lock, owner = leases[0].key, leases[0].field
	}
	s.log.Warn("rlock watchdog: renewal failed; retrying until the leases run out",
		"lock", lock, "owner", owner, "locks", len(leases), "node", r.node.id, "err", err)
}

// tick dispatches a full round over every registered lease.
func (lp *loop) tick(now time.Time) {
	s := lp.s
	lp.nextTick = lp.nextTick.Add(s.interval)
	if !lp.nextTick.After(now) { // the loop itself fell behind: no burst
		lp.nextTick = now.Add(s.interval)
	}
	s.mu.Lock()
	all := slices.Clone(s.all)
	if len(all) > 0 {
		s.stats.Rounds++
	}
	s.mu.Unlock()
	if len(all) == 0 {
		return
	}
	s.armAll(all)
	t := &tick{start: now}
	lp.dispatch(all, t, now)
	for id, n := range lp.nodes { // forget nodes that serve none of them
		if n.ticked != t && n.inFlight == nil && len(n.pending) == 0 {
			delete(lp.nodes, id)
		}
	}
}

// resend dispatches the leases whose last round failed.
func (lp *loop) resend(now time.Time) {
	s := lp.s
	var again []*Lease
	s.mu.Lock()
	for _, l := range lp.retry {
		if l.pos >= 0 && l.lastErr.Load() != nil {
			again = append(again, l)
		}
	}
	if len(again) > 0 {
		s.stats.Rounds++
	}
	s.mu.Unlock()
	lp.retry = nil
	if len(again) > 0 {
		lp.dispatch(again, nil, now)
	}
}

// dispatch groups leases by node and starts a round on every node that has
// none in flight; a busy node gets them as soon as its round ends.
func (lp *loop) dispatch(leases []*Lease, t *tick, now time.Time) {
	for _, g := range lp.s.route.group(lp.s.ctx, leases) {
		n := lp.nodes[g.id]
		if n == nil {
			n = &node{id: g.id}
			lp.nodes[g.id] = n
		}
		n.target = g.target
		for _, l := range g.leases {
			l.node.Store(&n.id)
		}
		if t != nil {
			t.open++
			n.ticked = t
		}
		switch {
		case n.inFlight == nil:
			lp.start(n, g.leases, t, now)
		case t != nil: // a tick's leases are all of the node's: they replace what waited
			if n.pendTick != nil {
				lp.tickDone(n.pendTick, now)
			}
			n.pending, n.pendTick = g.leases, t
			lp.s.mu.Lock()
			lp.s.stats.Late++
			lp.s.mu.Unlock()
		default:
			n.pending = append(n.pending, g.leases...)
		}
	}
}

// start sends leases (each once, and only those still registered) to n in
// a goroutine that reports the outcome on lp.results. Whether a lease is
// still registered is checked, and its round counted in flight, under
// s.mu, a chunk at a time: a lease stopped before that is not sent (leases
// wait parked while the node is busy, and a tick's snapshot is taken before
// grouping), and StopAndWait after it waits for the round.
func (lp *loop) start(n *node, leases []*Lease, t *tick, now time.Time) {
	s := lp.s
	s.seq++
	once := leases[:0]
	for lo := 0; lo < len(leases); lo += applyChunk {
		s.mu.Lock()
		for _, l := range leases[lo:min(lo+applyChunk, len(leases))] {
			if l.pos >= 0 && !l.over.Load() && l.mark != s.seq {
				l.mark = s.seq
				l.inflight.Add(1)
				once = append(once, l)
			}
		}
		s.mu.Unlock()
	}
	if len(once) == 0 { // all stopped meanwhile
		if t != nil {
			lp.tickDone(t, now)
		}
		return
	}
	r := &round{node: n, target: n.target, leases: once, tick: t, started: now, deadline: now.Add(s.interval), eval: !n.scripted}
	n.inFlight = r
	lp.busy++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// go-redis may go on (retries) until the lease: a reply is of use
		// until then, even after the loop stopped waiting for it.
		ctx, cancel := context.WithDeadline(s.ctx, now.Add(s.lease))
		s.beforeSend(r)
		r.renew(ctx, s.batch, s.leaseArg)
		r.latency = time.Since(r.sent)
		cancel()
		s.mu.Lock()
		for _, l := range r.leases {
			l.inflight.Add(-1)
		}
		s.idle.Broadcast()
		s.mu.Unlock()
		select {
		case lp.results <- r:
		case <-s.closing:
		}
	}()
}

// finish applies the replies of a round that ended and starts the node's
// next round if one is waiting.
func (lp *loop) finish(r *round, now time.Time) {
	n := r.node
	n.inFlight = nil
	n.scripted = r.answered
	lp.busy--
	lp.apply(r)
	if r.tick != nil {
		lp.tickDone(r.tick, now)
	}
	if len(n.pending) > 0 {
		leases, t := n.pending, n.pendTick
		n.pending, n.pendTick = nil, nil
		lp.start(n, leases, t, now)
	}
}

// apply records a round's replies, a chunk of leases at a time: renewed
// leases get their new expiry, leases not held are reported lost, failed
// ones are retried. A reply older than the lease's last renewal (from a
// node that no longer serves it) is ignored.
func (lp *loop) apply(r *round) {
	s := lp.s
	renewedTo := newCohort(r.sent.Add(s.lease))
	renewedUntil := r.sent.Add(s.lease).UnixNano()
	var lost, failed []*Lease
	renewed := 0
	for lo := 0; lo < len(r.order); lo += applyChunk {
		s.mu.Lock()
		now := time.Now().UnixNano()
		for i := lo; i < min(lo+applyChunk, len(r.order)); i++ {
			l := r.order[i]
			if l.pos < 0 || l.over.Load() || !r.sent.After(l.base) {
				continue
			}
			switch r.held[i] {
			case 1:
				if now >= l.until.Load() {
					// Ran out before the reply came: lost, whatever
					// the reply says (Until never moves once passed);
					// the watch or its cohort reports it.
					continue
				}
				l.base = r.sent
				l.until.Store(renewedUntil)
				l.lastErr.Store(nil)
				if !l.armed.Load() {
					s.moveTo(l, renewedTo)
				}
				renewed++
			case 0:
				s.unregister(l)
				if l.over.CompareAndSwap(false, true) {
					l.end()
					lost = append(lost, l)
				}
			default:
				failed = append(failed, l)
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.stats.RoundTrips += uint64(r.trips)
	s.stats.Renewed += uint64(renewed)
	s.stats.Lost += uint64(len(lost))
	s.mu.Unlock()
	s.roundDone(r, renewed, len(lost), len(failed))
	if len(failed) > 0 {
		cause := r.err
		if cause == nil { // cannot happen: every failed batch records its error
			cause = base.ErrUnexpectedReply
		}
		err := fmt.Errorf("renewal on %s: %w", r.node.id, cause)
		if r.timedOut { // retried already: keep the real error
			perr := &err
			for _, l := range failed {
				l.lastErr.Store(perr)
			}
			s.mu.Lock()
			s.stats.Errors++
			s.mu.Unlock()
		} else {
			lp.failed(r, err, failed, time.Now())
		}
	}
	for _, l := range lost {
		l.lost(base.Lost(base.LossNotHeldAtRenewal, fmt.Errorf("%w: %q was no longer held by this owner at renewal", base.ErrLockLost, l.key)))
	}
}

// tickDone counts the end of one of t's node rounds.
func (lp *loop) tickDone(t *tick, now time.Time) {
	t.open--
	if t.open > 0 {
		return
	}
	d := now.Sub(t.start)
	s := lp.s
	s.mu.Lock()
	s.stats.Ticks++
	s.stats.TickTime += d
	s.stats.MaxTickTime = max(s.stats.MaxTickTime, d)
	s.mu.Unlock()
}
