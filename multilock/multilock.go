package multilock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/fence"
)

// DefaultReplyWait is the reply wait of quorum mode when the context has
// no deadline and WithReplyWait was not given.
const DefaultReplyWait = 500 * time.Millisecond

// MultiLock holds several locks as one: by default it is held when every
// member is held by the caller's owner (all mode); with WithQuorum(k), when
// k of its n members are (quorum mode). It satisfies rlock.LeaseLocker, so
// it can itself be a member of another MultiLock. Create it with New; it is
// safe for concurrent use and does no I/O until a method is called.
type MultiLock struct {
	members []rlock.Locker
	labels  []string // by member, for errors
	lease   time.Duration
	quorum  int  // k; n in all mode
	byVote  bool // quorum mode

	stepMin, stepMax   time.Duration // all mode: member wait
	replyWait          time.Duration // quorum mode: 0 derives it from ctx
	retryMin, retryMax time.Duration // quorum mode: Lock's retry delay

	fence fence.Fence // quorum mode: releases in flight, by owner and member
	// run, by member: runs work on a background worker of the member's
	// client (core.Runner); nil for a member that is not one of rlock's
	// locks. See spawn.
	run []func(func()) bool

	// gate orders the goroutines that share this handle's default owner
	// (see core.Gate): one holds the MultiLock at a time; a holder
	// re-enters with a ctx that descends from Ctx.
	gate *core.Gate

	mu    sync.Mutex
	holds map[string]*holding // by owner ID, "" the default owner
	last  *holding            // the holding period of the last acquisition
}

var (
	_ rlock.Locker      = (*MultiLock)(nil)
	_ rlock.LeaseLocker = (*MultiLock)(nil)
)

// Option configures a MultiLock. A nil Option is ignored.
type Option func(*config) error

type config struct {
	lease              time.Duration
	quorum             int
	stepMin, stepMax   time.Duration
	replyWait          time.Duration
	retryMin, retryMax time.Duration
	names              []string
	allOnly, voteOnly  string // an option given that needs all mode, quorum mode
}

// WithLease sets the lease of Lock and TryLock (LockLease and TryLockLease
// choose one per call): every member that implements rlock.LeaseLocker
// expires d after it was acquired and nothing renews it. d must be at
// least 1 ms, or rlock.WatchdogMode (0, the default): every such member is
// renewed by its client's watchdog for as long as it is held. Members that
// only implement rlock.Locker keep their own handle's lease setting.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		c.lease = d
		return nil
	}
}

// WithQuorum switches the MultiLock to quorum mode: it is held when k of
// its n members are, 1 <= k <= n. Members are then asked in parallel, a
// failure budget of n-k members may fail, and an acquisition is valid for
// its lease minus the time it took and a clock drift allowance (see the
// package documentation). Default: all mode, every member in order.
func WithQuorum(k int) Option {
	return func(c *config) error {
		if k < 1 {
			return fmt.Errorf("%w: quorum %d is not positive", rlock.ErrInvalidArgument, k)
		}
		c.quorum = k
		return nil
	}
}

// WithMemberWait bounds, in all mode, how long Lock waits for a member
// while it holds the members before it. The first wait of each acquisition
// lasts a random time between lo/2 and lo; every failed round doubles it,
// up to hi. When the wait runs out, Lock releases what it holds and starts
// over from the first member. Default: 50 ms up to 1 s. Both must be
// positive and lo <= hi; quorum mode rejects it (see WithReplyWait).
func WithMemberWait(lo, hi time.Duration) Option {
	return func(c *config) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("%w: member wait %v..%v (want 0 < lo <= hi)", rlock.ErrInvalidArgument, lo, hi)
		}
		c.stepMin, c.stepMax, c.allOnly = lo, hi, "WithMemberWait"
		return nil
	}
}

// WithReplyWait sets, in quorum mode, how long one attempt waits for each
// member's answer. Default: the time left until the context's deadline
// divided by the number of members, at least 1 ms (Redisson's rule), or
// DefaultReplyWait when the context has no deadline. d must be positive;
// all mode rejects it.
func WithReplyWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: reply wait %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.replyWait, c.voteOnly = d, "WithReplyWait"
		return nil
	}
}

// WithRetryDelay sets, in quorum mode, how long Lock waits between two
// attempts: a random time between lo and hi, so that competing clients do
// not retry in step. Default: 20 ms to 200 ms. Both must be positive and
// lo <= hi; all mode rejects it.
func WithRetryDelay(lo, hi time.Duration) Option {
	return func(c *config) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("%w: retry delay %v..%v (want 0 < lo <= hi)", rlock.ErrInvalidArgument, lo, hi)
		}
		c.retryMin, c.retryMax, c.voteOnly = lo, hi, "WithRetryDelay"
		return nil
	}
}

// WithMemberNames names the members in errors (for example by server
// address), in the order of New's list. Default: `member 0 ("<name>")`,
// and so on.
func WithMemberNames(names ...string) Option {
	return func(c *config) error {
		c.names = slices.Clone(names)
		return nil
	}
}

// New returns a MultiLock over locks, acquired in the given order in all
// mode. The locks may be of any kind and on any clients and servers. It
// does no I/O. It reports rlock.ErrInvalidArgument for an empty list, a nil
// member, a quorum above the number of members, WithMemberNames with the
// wrong count, an option of the other mode, or a bad option. The slice is
// copied.
func New(locks []rlock.Locker, opts ...Option) (*MultiLock, error) {
	if len(locks) == 0 {
		return nil, fmt.Errorf("%w: a MultiLock needs at least one lock", rlock.ErrInvalidArgument)
	}
	for i, l := range locks {
		if core.IsNil(l) {
			return nil, fmt.Errorf("%w: lock %d is nil", rlock.ErrInvalidArgument, i)
		}
	}
	cfg := config{
		stepMin: 50 * time.Millisecond, stepMax: time.Second,
		retryMin: 20 * time.Millisecond, retryMax: 200 * time.Millisecond,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(len(locks)); err != nil {
		return nil, err
	}
	m := &MultiLock{
		members: slices.Clone(locks), lease: cfg.lease,
		quorum: len(locks), byVote: cfg.quorum > 0,
		stepMin: cfg.stepMin, stepMax: cfg.stepMax,
		replyWait: cfg.replyWait, retryMin: cfg.retryMin, retryMax: cfg.retryMax,
		holds: make(map[string]*holding),
		gate:  core.NewGate(),
	}
	if m.byVote {
		m.quorum = cfg.quorum
	}
	for _, l := range m.members {
		m.run = append(m.run, core.Runner(l))
	}
	m.labels = cfg.names
	if m.labels == nil {
		for i, l := range locks {
			m.labels = append(m.labels, fmt.Sprintf("member %d (%q)", i, l.Name()))
		}
	}
	return m, nil
}

func (c *config) check(n int) error {
	switch {
	case c.quorum > n:
		return fmt.Errorf("%w: quorum %d of %d members", rlock.ErrInvalidArgument, c.quorum, n)
	case c.names != nil && len(c.names) != n:
		return fmt.Errorf("%w: %d member names for %d members", rlock.ErrInvalidArgument, len(c.names), n)
	case c.quorum > 0 && c.allOnly != "":
		return fmt.Errorf("%w: %s is for all mode, not WithQuorum", rlock.ErrInvalidArgument, c.allOnly)
	case c.quorum == 0 && c.voteOnly != "":
		return fmt.Errorf("%w: %s needs WithQuorum", rlock.ErrInvalidArgument, c.voteOnly)
	}
	return nil
}

// Name returns the members' distinct names joined by ",", in member order
// (a quorum over one name on n servers is called by that name).
func (m *MultiLock) Name() string {
	var names []string
	for _, l := range m.members {
		if !slices.Contains(names, l.Name()) {
			names = append(names, l.Name())
		}
	}
	return strings.Join(names, ",")
}

// Members returns the members, in the order given to New.
func (m *MultiLock) Members() []rlock.Locker { return slices.Clone(m.members) }

// Quorum returns how many members must be held: k in quorum mode, every
// member in all mode.
func (m *MultiLock) Quorum() int { return m.quorum }

// Lock blocks until the caller's owner holds the MultiLock, or ctx ends.
//
// In all mode it takes the members in order. It waits for the first one
// for as long as ctx allows; for each later one, while holding the earlier
// ones, it waits at most the member wait (see WithMemberWait), so two
// MultiLocks that take shared locks in different orders cannot deadlock:
// when the wait runs out, Lock releases every member it took, waits until
// the busy member can be taken (holding nothing), lets it go, and starts
// over with a longer wait. Members that implement rlock.LeaseLocker are
// taken in watchdog mode while the others are acquired (so none expires
// however long that takes) and then given the lease (see WithLease),
// except members the owner held already: a re-entered member keeps its
// hold's lease. Re-locking a MultiLock the owner holds re-enters every
// member; each Lock needs one Unlock. When a member fails otherwise (a
// Redis error, a closed client), Lock releases the members it took and
// returns an *Error naming the member, joined with any error of that
// release.
//
// In quorum mode it makes attempts as TryLock does, waiting a random retry
// delay (WithRetryDelay) between them, until one succeeds. The reply wait
// is derived anew for every attempt from the time ctx has left. Errors
// other than "not obtained" end it at once, and so does a failure on so
// many closed clients that no quorum is left.
//
// When ctx ends, Lock returns an error wrapping ctx's error (never
// rlock.ErrNotObtained; the last attempt's failure is in its text) and
// holds no more than before. A nil ctx, a bad owner ID in ctx or a lease
// neither rlock.WatchdogMode nor at least 1 ms is rejected with
// rlock.ErrInvalidArgument before any member is asked (on every method).
func (m *MultiLock) Lock(ctx context.Context) error { return m.acquire(ctx, m.lease, true) }

// TryLock makes one attempt.
//
// In all mode it tries each member once, in order; when a member is held
// by another owner it releases the members it took and returns an *Error
// wrapping rlock.ErrNotObtained that names the member.
//
// In quorum mode it asks every member in parallel and waits for each at
// most the reply wait (see WithReplyWait), so a member that is down or
// frozen delays it by that much at most. The MultiLock is obtained when k
// members granted it and its validity (lease - elapsed - drift, see
// Drift; elapsed runs from the earliest request sent to a member that
// granted) is positive. Otherwise every member that granted is released
// again (TryLock waits for these releases at most another reply wait, and
// the owner's next attempt on such a member waits for its release first);
// a member whose outcome is unknown (no answer in time, a lost reply) holds
// nothing by rlock.Locker's contract: rlock's locks give such a grant back
// by themselves. The error is then an *Error wrapping rlock.ErrNotObtained
// that lists each member that failed and why. Re-locking a MultiLock this
// handle holds for the caller's owner only counts one more hold (no I/O;
// the lease stays as it is), as long as the holding period is neither lost
// nor past its validity; each successful Lock or TryLock needs one Unlock.
//
// When ctx ends during the attempt it returns an error wrapping ctx's
// error, after the same clean-up.
func (m *MultiLock) TryLock(ctx context.Context) error { return m.acquire(ctx, m.lease, false) }

// LockLease is Lock with lease for this acquisition instead of the
// WithLease setting: a lease of at least 1 ms, or rlock.WatchdogMode.
func (m *MultiLock) LockLease(ctx context.Context, lease time.Duration) error {
	return m.acquire(ctx, lease, true)
}

// TryLockLease is TryLock with lease for this acquisition instead of the
// WithLease setting.
func (m *MultiLock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return m.acquire(ctx, lease, false)
}

func (m *MultiLock) acquire(ctx context.Context, lease time.Duration, wait bool) error {
	if err := checkInput(ctx, lease); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return m.ctxErr(ctx)
	}
	gated := ownerKey(ctx) == ""
	reentry := gated && core.Reenters(ctx, m.gate)
	if gated && !reentry {
		ok, err := m.gate.Enter(ctx, true, wait)
		switch {
		case err != nil:
			return m.ctxErr(ctx)
		case !ok:
			return fmt.Errorf("%w: %q is held through this handle (by another goroutine)", rlock.ErrNotObtained, m.Name())
		}
	}
	var err error
	if m.byVote {
		err = m.acquireQuorum(ctx, lease, wait)
	} else {
		err = m.acquireAll(ctx, lease, wait)
	}
	switch {
	case !gated:
	case err == nil:
		m.gate.Granted(true, reentry)
	case !reentry:
		m.gate.Leave(true)
	}
	return err
}

func (m *MultiLock) ctxErr(ctx context.Context) error {
	return fmt.Errorf("multilock: waiting for %q: %w", m.Name(), ctx.Err())
}

// checkInput rejects, before any member is asked, what a member would
// reject only once other members were taken: a nil ctx, a bad owner ID in
// ctx, a lease neither rlock.WatchdogMode nor at least 1 ms.
func checkInput(ctx context.Context, lease time.Duration) error {
	if err := base.CheckContext(ctx); err != nil {
		return err
	}
	if _, _, err := base.OwnerFrom(ctx); err != nil {
		return err
	}
	return base.CheckLease(lease)
}

// ownerKey returns the owner ID ctx carries, "" for the default owner.
func ownerKey(ctx context.Context) string {
	id, _, _ := base.OwnerFrom(ctx)
	return id
}

// SetLease changes the lease of the caller's owner's holding through this
// handle, in parallel on the holds its acquisition created on members
// that implement rlock.LeaseLocker (see rlock.LeaseLocker.SetLease): a
// positive lease restarts the validity (Until) from now,
// rlock.WatchdogMode hands them to their watchdog. A hold the owner had
// before it took the MultiLock (a re-entered member) keeps its own lease,
// in either mode; Until stays within it (see Until). It returns an error
// wrapping rlock.ErrNotHeld, without I/O, when the handle holds nothing for
// the owner. In all mode it returns an *Error naming every member that
// failed. In quorum mode it covers the members that granted this handle's
// holding and returns an *Error wrapping rlock.ErrNotHeld when fewer than
// k members still held it (a re-entered member counts as held). Like
// Unlock it runs to completion even when ctx is cancelled.
func (m *MultiLock) SetLease(ctx context.Context, lease time.Duration) error {
	if err := checkInput(ctx, lease); err != nil {
		return err
	}
	if m.byVote {
		return m.setLeaseQuorum(ctx, lease)
	}
	return m.setLeaseAll(ctx, lease)
}

// Unlock releases one hold of the caller's owner.
//
// In all mode it releases one hold on every member, in parallel, and
// returns an *Error naming every member that failed; when no member was
// held by the owner, every failure wraps rlock.ErrNotHeld.
//
// In quorum mode it returns an error wrapping rlock.ErrNotHeld, without
// I/O, when this handle holds nothing for the owner; the last hold
// releases every member that granted it, in parallel. When the holding
// period had ended by loss before (see Err), or its validity had run out,
// Unlock ends it whatever holds remain, releases what is left on the
// members and returns that loss (wrapping rlock.ErrLockLost), joined with
// any release failure. When the release finds fewer than k members still
// holding (the lock was lost: expired, force-unlocked, servers restarted)
// it returns an *Error wrapping rlock.ErrNotHeld, and the holding period
// ends as lost; other member failures give an *Error without it.
//
// Like the members' Unlock, it runs to completion even when ctx is
// cancelled. A nil ctx or a bad owner ID is rejected with
// rlock.ErrInvalidArgument, asking no member.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if err := checkInput(ctx, rlock.WatchdogMode); err != nil {
		return err
	}
	if ownerKey(ctx) == "" {
		defer m.gate.Released(true)
	}
	if m.byVote {
		return m.unlockQuorum(ctx)
	}
	errs := m.each(m.every(), func(_ int, l rlock.Locker) error { return l.Unlock(ctx) })
	m.settle(ownerKey(ctx))
	return m.failures("unlock", errs, nil)
}

// IsHeld reports whether the caller's owner holds the MultiLock: every
// member in all mode, at least k members in quorum mode, as the members
// answer now (in parallel; it does not consult this handle's holdings). It
// returns an *Error naming the members that failed when their answers
// would decide it.
func (m *MultiLock) IsHeld(ctx context.Context) (bool, error) {
	if err := checkInput(ctx, rlock.WatchdogMode); err != nil {
		return false, err
	}
	yes := make([]bool, len(m.members))
	errs := m.each(m.every(), func(i int, l rlock.Locker) (err error) {
		yes[i], err = l.IsHeld(ctx)
		return err
	})
	held, fails := 0, []Failure(nil)
	for i, err := range errs {
		if err != nil {
			fails = append(fails, m.failure(i, err))
		} else if yes[i] {
			held++
		}
	}
	switch {
	case held >= m.quorum:
		return true, nil
	case held+len(fails) < m.quorum:
		return false, nil
	}
	return false, m.newError("is held", held, fails, nil)
}

// every returns a true for every member.
func (m *MultiLock) every() []bool {
	all := make([]bool, len(m.members))
	for i := range all {
		all[i] = true
	}
	return all
}

// each runs fn on the members in which, in parallel (the last one on the
// calling goroutine, which waits for them all anyway), and returns their
// errors by member.
func (m *MultiLock) each(which []bool, fn func(int, rlock.Locker) error) []error {
	errs := make([]error, len(m.members))
	last := -1
	var wg sync.WaitGroup
	for i, ok := range which {
		if !ok {
			continue
		}
		if j := last; j >= 0 {
			l := m.members[j]
			wg.Add(1)
			m.spawn(j, func() {
				defer wg.Done()
				errs[j] = fn(j, l)
			})
		}
		last = i
	}
	if last >= 0 {
		errs[last] = fn(last, m.members[last])
	}
	wg.Wait()
	return errs
}

// spawn runs f for member i in the background: on a parked worker of the
// member's client when it is one of rlock's locks (a new goroutine costs
// several µs more, mostly growing its stack to a script call's depth), in
// a goroutine of its own otherwise.
func (m *MultiLock) spawn(i int, f func()) {
	if run := m.run[i]; run != nil && run(f) {
		return
	}
	go f()
}

// failures returns an *Error for op listing the members whose errs are
// not nil, or nil when there are none.
func (m *MultiLock) failures(op string, errs []error, sentinel error) error {
	var fails []Failure
	for i, err := range errs {
		if err != nil {
			fails = append(fails, m.failure(i, err))
		}
	}
	if len(fails) == 0 {
		return nil
	}
	return m.newError(op, len(m.members)-len(fails), fails, sentinel)
}

// Drift returns the clock drift allowance subtracted from a lease to get
// the validity of a quorum acquisition, and from the members' Until: 1% of
// the lease plus 2 ms.
func Drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// Done returns a channel that is closed when the holding period of the
// last successful acquisition through this handle ends (Ctx().Done()).
// Before the first acquisition it returns a closed channel.
func (m *MultiLock) Done() <-chan struct{} { return m.Ctx().Done() }

// Err returns nil while the holding period of the last acquisition goes
// on, or when it ended by Unlock. After a loss it returns an error wrapping
// rlock.ErrLockLost: in all mode naming the member that was lost (also one
// that Unlock found lost); in quorum mode an *Error naming the members lost
// once fewer than k still held, or saying that the validity of an explicit
// lease ran out.
func (m *MultiLock) Err() error {
	if h := m.lastHolding(); h != nil {
		return h.result()
	}
	return nil
}

// Ctx returns the holding period of the last successful acquisition
// through this handle as a context (as etcd's Session.Ctx): it is
// cancelled when the holding period ends, and context.Cause then says why:
// the error Err returns (wrapping rlock.ErrLockLost) after a loss,
// context.Canceled after the owner's last Unlock. Members report their own
// holding periods (rlock's locks and MultiLocks do); a member that reports
// none cannot end it. In all mode it ends at the first member lost; in
// quorum mode once fewer than k members still hold, or when the validity
// of an explicit lease runs out. Before the first acquisition it is
// already cancelled. It does not derive from the ctx given to Lock.
func (m *MultiLock) Ctx() context.Context {
	if h := m.lastHolding(); h != nil {
		return h.ctx
	}
	return endedCtx
}

// Until returns the time up to which the holding period of the last
// acquisition through this handle is known to last, already less the
// drift allowance (see Drift), from the members' own Until (the end of an
// explicit lease, or in watchdog mode the watchdog lease counted from the
// last successful renewal sent): in all mode the earliest, in quorum mode
// the k-th latest among the members that granted and still hold; in
// quorum mode with an explicit lease, the validity end (restarted by
// SetLease) unless that is later: a member the owner held before keeps its
// own lease, and Until never goes beyond what the members protect. In
// watchdog mode it moves on with every renewal. It is
// the zero time once the holding period ended, before the first
// acquisition, and when the members do not report Until. Act only while
// time.Now().Before(Until()).
func (m *MultiLock) Until() time.Time {
	if h := m.lastHolding(); h != nil {
		return h.knownUntil()
	}
	return time.Time{}
}

func (m *MultiLock) lastHolding() *holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
