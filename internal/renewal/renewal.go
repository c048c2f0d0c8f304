// Package renewal is the watchdog: one renewal scheduler per client (see
// package watchdog for how it works and what it reports).
package renewal

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/watchdog"
)

// Defaults.
const (
	DefaultLease     = watchdog.DefaultLease
	DefaultBatchSize = watchdog.DefaultBatchSize
)

// Option configures a Scheduler. A nil Option is ignored.
type Option func(*Scheduler) error

// WithLease sets the lease each renewal sets (default DefaultLease). It must
// be at least 3 ms.
func WithLease(d time.Duration) Option {
	return func(s *Scheduler) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: watchdog lease %v is less than 3ms", base.ErrInvalidArgument, d)
		}
		s.lease = d
		return nil
	}
}

// WithInterval sets how often every lock is renewed (default lease/3). It
// must be positive and less than the lease. It also bounds how long one
// node's renewal round is waited for before it counts as failed.
func WithInterval(d time.Duration) Option {
	return func(s *Scheduler) error {
		if d <= 0 {
			return fmt.Errorf("%w: watchdog interval %v is not positive", base.ErrInvalidArgument, d)
		}
		s.interval = d
		return nil
	}
}

// WithBatchSize sets how many locks one renewal script call carries at most
// (default DefaultBatchSize); a node's calls of one tick go out in one
// pipeline. It must be between 1 and 10000.
func WithBatchSize(n int) Option {
	return func(s *Scheduler) error {
		if n < 1 || n > 10000 {
			return fmt.Errorf("%w: watchdog batch size %d is not in [1, 10000]", base.ErrInvalidArgument, n)
		}
		s.batch = n
		return nil
	}
}

// WithLogger sets where renewal errors are logged (default: nowhere; loss
// is reported to holders either way).
func WithLogger(l *slog.Logger) Option {
	return func(s *Scheduler) error {
		s.log = l
		return nil
	}
}

// Scheduler renews the leases of a client's held locks. Create it with New;
// it is safe for concurrent use.
type Scheduler struct {
	route     router
	lease     time.Duration
	leaseArg  string // the lease in milliseconds, the script's argument
	interval  time.Duration
	retry     time.Duration
	batch     int
	log       *slog.Logger
	hooks     []func(Round)            // see WithRoundHook
	sendHooks []func(string, []string) // see WithSendHook

	ctx    context.Context // of every renewal; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	all     []*Lease   // every registered lease
	cohorts cohortHeap // the leases by when they run out (see expiry.go)
	lastAdd *cohort    // the cohort of the latest Add
	running bool       // the loop goroutine exists
	wakeAt  time.Time  // when the loop's timer fires, as of its last plan (next); zero before its first
	wake    chan struct{}
	closing chan struct{}
	closed  bool
	wg      sync.WaitGroup
	stats   Stats

	seq uint64 // node rounds started; owned by the loop goroutine

	idle *sync.Cond // on mu; broadcast when a round's requests are answered

	watch watch                     // the leases the ticks handed over, by when they run out (see expiry.go)
	goneQ atomic.Pointer[goneEntry] // leases the watch reported lost, to unregister (see deliverPart)
}

// Lease is one lock's registration with the scheduler.
type Lease struct {
	s     *Scheduler
	key   string
	field string
	slot  int // the key's hash slot, on a cluster
	// key and field boxed once, for the renewal commands' arguments
	keyArg, fieldArg any
	lost             func(error)

	// Guarded by s.mu.
	pos        int       // index in s.all; -1 once no longer registered
	base       time.Time // when the last successful renewal (or the acquire) was sent
	c          *cohort   // runs out with it (see expiry.go); nil once armed
	prev, next *Lease    // in c's list

	// until is base + lease (unix ns), written under s.mu, read by anyone:
	// it only moves on, and never once it has passed (see apply).
	until atomic.Int64
	// armed is set (under s.mu) by the first tick that carries the
	// lease, when it hands it from its cohort to the watch (see expiry.go).
	armed atomic.Bool
	// wb is the watch's bucket the lease is in, wi its index there;
	// guarded by s.watch.mu.
	wb *bucket
	wi int
	// over is set by whoever ends the registration first: Stop, Close,
	// or the one report of its loss.
	over atomic.Bool

	// Owned by the loop goroutine.
	inflight atomic.Int32 // rounds carrying it whose requests are not answered yet

	lastErr atomic.Pointer[error]  // why the last renewal round failed; nil after a success
	node    atomic.Pointer[string] // the node the last round was meant for
	mark    uint64                 // the last round it was put in (drops duplicates)
}

// Stats counts what a scheduler has done.
type Stats = watchdog.Stats

// New returns a scheduler that renews through rdb: a *redis.Client, a
// *redis.ClusterClient or a *redis.Ring is renewed node by node as the
// package doc says; any other redis.Scripter is treated as one server. New
// does no I/O and starts no goroutine until the first Add. It reports
// ErrInvalidArgument for a nil rdb or a bad option.
func New(rdb redis.Scripter, opts ...Option) (*Scheduler, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
	}
	s := &Scheduler{
		lease:   DefaultLease,
		batch:   DefaultBatchSize,
		log:     slog.New(slog.DiscardHandler),
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.interval == 0 {
		s.interval = s.lease / 3
	}
	if s.interval >= s.lease {
		return nil, fmt.Errorf("%w: watchdog interval %v is not less than the lease %v", base.ErrInvalidArgument, s.interval, s.lease)
	}
	s.retry = min(max(s.interval/4, time.Millisecond), time.Second)
	s.leaseArg = strconv.FormatInt(s.lease.Milliseconds(), 10)
	s.route = newRouter(rdb)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// LeaseDuration returns the lease each renewal sets.
func (s *Scheduler) LeaseDuration() time.Duration { return s.lease }

// Until returns the time up to which the lock is known to be held: the
// watchdog lease counted from when the last successful renewal (or the
// acquisition) was sent. Once it has passed, it no longer moves: the lock
// is lost, and reported lost within the bound the package doc states.
func (l *Lease) Until() time.Time { return time.Unix(0, l.until.Load()) }

// RanOut returns the loss the lease reports once Until has passed (see
// the package doc for its cause).
func (l *Lease) RanOut() error { return l.ranOut() }

// Interval returns the time between renewal rounds.
func (s *Scheduler) Interval() time.Duration { return s.interval }

// Add registers a lock for renewal: key is the lock hash, field the owner
// field that holds it, and sent the moment the acquire that set the current
// lease was sent (the lease is counted from there). lost is called once, from
// a scheduler goroutine, if the lock is found lost; it must not block. The
// registration ends with Stop, with loss, or with Close. Add after Close
// reports lost at once with base.ErrClosed.
func (s *Scheduler) Add(key, field string, sent time.Time, lost func(error)) *Lease {
	return s.AddBoxed(key, field, key, field, sent, lost)
}

// AddBoxed is Add with key and field also given as the any values the
// renewal commands carry (keyArg must hold key, fieldArg field): a caller
// that registers the same key and field again and again boxes them once,
// sparing each Add two allocations.
func (s *Scheduler) AddBoxed(key, field string, keyArg, fieldArg any, sent time.Time, lost func(error)) *Lease {
	l := &Lease{s: s, key: key, field: field, keyArg: keyArg, fieldArg: fieldArg, lost: lost, pos: -1, base: sent}
	if s.route.slotted() {
		l.slot = base.Slot(key)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lost(fmt.Errorf("%w: %w", base.ErrLockLost, base.ErrClosed))
		return l
	}
	expires := sent.Add(s.lease)
	l.until.Store(expires.UnixNano())
	earlier := s.register(l, expires)
	switch {
	case !s.running:
		s.running = true
		s.wakeAt = time.Time{}
		s.wg.Add(1)
		go newLoop(s).run()
	case earlier && expires.Before(s.wakeAt):
		// The loop's timer is set later: wake it. Otherwise (its next
		// tick comes first, as it does for a fresh lease) the loop plans
		// anew when its timer fires, and waking it would cost a goroutine
		// switch per Add for nothing.
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	return l
}

// Stop ends the registration: the lock is no longer renewed. A renewal
// already in flight may still extend it, which is harmless when the lock is
// being released (renewal only extends a lock still held by the same owner
// field), but not when an explicit lease is set next: see StopAndWait.
// Stop is idempotent.
func (l *Lease) Stop() {
	s := l.s
	l.end()
	s.mu.Lock()
	if l.pos >= 0 {
		s.unregister(l)
	}
	s.mu.Unlock()
}

// end marks the registration over, so that its loss is not reported, and
// takes it out of the watch.
func (l *Lease) end() {
	l.over.Store(true)
	if l.armed.Load() {
		l.s.unwatch(l)
	}
}

// StopAndWait is Stop, then waits until every renewal of the lock already
// on its way is answered (as long as that round trip takes), so that a
// command the caller sends next runs after it on the server: a renewal must
// not restore the watchdog's lease over an explicit one set next.
func (l *Lease) StopAndWait() {
	s := l.s
	l.end()
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.pos >= 0 {
		s.unregister(l)
	}
	for l.inflight.Load() > 0 {
		s.idle.Wait()
	}
}

// Close stops all renewal and waits for the scheduler's goroutines to exit.
// A renewal in flight is cancelled, but go-redis may hold it until the
// client's ReadTimeout on a frozen server, and Close waits for it.
// Registered locks are not reported lost; they expire within one lease
// unless released. Close is idempotent.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, l := range s.all {
			l.pos = -1
			l.end()
		}
		s.all, s.cohorts, s.lastAdd = nil, nil, nil
		close(s.closing)
		s.cancel()
	}
	s.mu.Unlock()
	s.closeWatch()
	s.wg.Wait()
}

// Stats returns a snapshot of the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregisterGone()
	st := s.stats
	st.Registered = len(s.all)
	return st
}
