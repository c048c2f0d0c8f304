package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
)

// grant is what one member's acquisition created, as far as the MultiLock
// needs to know (see core.Grant).
type grant struct {
	// ctx is the member's holding period the acquisition is part of; nil
	// for a member that reports none.
	ctx context.Context
	// until returns the time up to which that holding period is known to
	// last; nil for a member that does not tell.
	until func() time.Time
	// setLease sets the lease of the hold the acquisition created; nil for
	// a member that takes no lease and for a re-entry, since a combinator
	// must never change the lease of a hold the owner had before (it would
	// stop the renewal of a hold in watchdog mode, which then expires
	// unnoticed). A member that is itself a combinator reports one that
	// reaches only the holds it created (core.Grant.SetLease).
	setLease func(context.Context, time.Duration) error
	// sent is when the acquisition was sent (quorum mode).
	sent time.Time
}

// holding is one holding period of the MultiLock: in quorum mode one
// owner's holding through this handle; in all mode the members' holding
// periods of the last acquisition. Its ctx is cancelled when it ends:
// with nil (context.Canceled) on release, with the loss otherwise.
type holding struct {
	m       *MultiLock
	owner   string // the owner ID, "" for the default owner
	count   int    // quorum mode: the owner's holds; guarded by m.mu
	granted []bool // members that granted
	grants  []grant
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu      sync.Mutex
	until   time.Time     // quorum mode, explicit lease: end of validity
	drift   time.Duration // subtracted from the members' Until
	timer   *time.Timer   // fires at until
	stops   []func() bool // the members' watches
	live    int           // members not known to have ended
	lost    []Failure     // quorum mode: members lost while held
	stopped bool          // released or ended: member ends no longer count
	armed   bool          // watched: the validity timer runs
	err     error         // why it ended; nil for a release
}

func (m *MultiLock) newHolding(owner string, granted []bool, grants []grant) *holding {
	h := &holding{m: m, owner: owner, granted: granted, grants: grants}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	if owner == "" {
		// A Lock with a ctx that descends from it re-enters the
		// MultiLock and, in all mode, each member.
		members := make([]context.Context, 0, len(grants))
		for _, g := range grants {
			members = append(members, g.ctx)
		}
		h.ctx = core.Mark(core.WithMarksOf(h.ctx, members...), m.gate)
	}
	for _, ok := range granted {
		if ok {
			h.live++
		}
	}
	return h
}

// retime sets the validity after an acquisition or SetLease with lease
// sent at start: an explicit lease in quorum mode ends the holding period
// at start + lease - drift; otherwise the members' Until tell, less the
// drift of their lease.
func (h *holding) retime(lease time.Duration, start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.until = time.Time{}
	if lease != rlock.WatchdogMode {
		h.drift = Drift(lease)
		if h.m.byVote {
			h.until = start.Add(lease - h.drift)
			h.arm()
		}
		return
	}
	longest := time.Duration(0) // the members' watchdog leases, as far as they tell
	for i, ok := range h.granted {
		if ok && h.grants[i].until != nil {
			longest = max(longest, time.Until(h.grants[i].until()))
		}
	}
	h.drift = Drift(longest)
}

// arm starts the validity timer, once h is watched. h.mu must be held.
func (h *holding) arm() {
	if h.armed && !h.until.IsZero() {
		h.timer = time.AfterFunc(time.Until(h.until), h.expire)
	}
}

// validUntil returns the end of an explicit lease's validity in quorum
// mode, zero otherwise.
func (h *holding) validUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// expire ends h when its validity has run out, unless it moved on.
func (h *holding) expire() {
	h.mu.Lock()
	until := h.until
	h.mu.Unlock()
	if until.IsZero() || time.Now().Before(until) {
		return
	}
	h.end(h.m.expired(until))
}

func (m *MultiLock) expired(until time.Time) error {
	return fmt.Errorf("%w: %q: validity ran out at %v", rlock.ErrLockLost, m.Name(), until.Format(time.RFC3339Nano))
}

// watch starts watching the members' holding periods.
func (h *holding) watch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
	h.arm()
	for i, ok := range h.granted {
		if ok && h.grants[i].ctx != nil {
			h.stops = append(h.stops, context.AfterFunc(h.grants[i].ctx, func() { h.memberEnded(i) }))
		}
	}
}

// memberEnded counts the end of member i's holding period. In all mode a
// loss ends h at once, and so does the last member's release (an Unlock
// settles the rest). In quorum mode a member that ended is no longer held,
// whatever the reason, and h ends as lost below k members.
func (h *holding) memberEnded(i int) {
	cause := context.Cause(h.grants[i].ctx)
	released := errors.Is(cause, context.Canceled) && !errors.Is(cause, rlock.ErrLockLost)
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.live--
	m := h.m
	var end error
	switch {
	case !m.byVote && !released:
		end = m.newError("hold", h.live, []Failure{m.failure(i, cause)}, rlock.ErrLockLost)
	case !m.byVote:
		if h.live > len(h.granted)-h.watched() { // a watched member still holds
			h.mu.Unlock()
			return
		}
	default:
		if released {
			cause = fmt.Errorf("%w: released on the member", rlock.ErrLockLost)
		}
		h.lost = append(h.lost, m.failure(i, cause))
		if h.live >= m.quorum {
			h.mu.Unlock()
			return
		}
		end = m.newError("hold", h.live, slices.Clone(h.lost), rlock.ErrLockLost)
	}
	h.mu.Unlock()
	h.end(end)
}

// watched returns how many members report their holding period.
func (h *holding) watched() int {
	n := 0
	for i, ok := range h.granted {
		if ok && h.grants[i].ctx != nil {
			n++
		}
	}
	return n
}

// stop makes h ignore its members' ends from now on: a release is in
// progress and its outcome ends h. It unregisters the watches too, so that
// the members' releases start no goroutine to report an end nobody counts.
func (h *holding) stop() {
	h.mu.Lock()
	h.stopped = true
	stops := h.stops
	h.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// end ends h: a release with err nil, a loss otherwise. Only the first
// call has an effect.
func (h *holding) end(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	h.stopped, h.err = true, err
	if h.timer != nil {
		h.timer.Stop()
	}
	for _, stop := range h.stops {
		stop()
	}
	h.cancel(err) // nil: context.Canceled
}

// ended reports whether h ended.
func (h *holding) ended() bool { return h.ctx.Err() != nil }

// result returns why h ended; nil after a release or while it lasts.
func (h *holding) result() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// knownUntil returns the time up to which h is known to last (see
// MultiLock.Until): from the members' own Until, less the drift, in all
// mode the earliest, in quorum mode the k-th latest; in quorum mode with
// an explicit lease, the end of its validity unless that is later (a
// member the owner held before keeps its own lease, which may be
// shorter). A member that does not tell its Until counts as protected
// for the validity of an explicit lease, and not at all otherwise.
func (h *holding) knownUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return time.Time{}
	}
	var us []time.Time
	for i, ok := range h.granted {
		if !ok || slices.ContainsFunc(h.lost, func(f Failure) bool { return f.Index == i }) {
			continue
		}
		if h.grants[i].until == nil {
			if !h.until.IsZero() {
				us = append(us, h.until)
			}
			continue
		}
		u := h.grants[i].until()
		if u.IsZero() && !h.m.byVote {
			return time.Time{} // a member's holding period ended
		}
		if !u.IsZero() {
			us = append(us, u.Add(-h.drift))
		}
	}
	slices.SortFunc(us, func(a, b time.Time) int { return b.Compare(a) }) // latest first
	k := len(us)                                                          // all mode: the earliest
	if h.m.byVote {
		k = h.m.quorum // the k-th latest
	}
	switch {
	case len(us) < k && !h.until.IsZero():
		// An explicit lease, and members that granted have ended since:
		// fewer than k protect it, and it is known to last no longer.
		return minTime(h.until, time.Now())
	case k == 0 || len(us) < k:
		return time.Time{}
	}
	if u := us[k-1]; h.until.IsZero() || u.Before(h.until) {
		return u
	}
	return h.until
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
