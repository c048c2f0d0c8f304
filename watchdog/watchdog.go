// Package watchdog renews the leases of held locks: one scheduler per
// client, whatever the number of locks it holds.
//
// A lock taken without an explicit lease gets the watchdog lease (30 s by
// default) and is registered with the scheduler. Every interval (lease/3 by
// default: a tick) the scheduler renews every registered lock.
//
// # One round trip per node per tick, nodes concurrently
//
// A tick groups the registered locks by the server that holds them: the
// master of each key's hash slot on a *redis.ClusterClient (MasterForKey),
// the shard of each key on a *redis.Ring, the one server otherwise. Each
// node's locks go out in one pipeline on that node's own client: script
// calls of up to 100 keys each (WithBatchSize; one hash slot per call on a
// cluster, as Redis requires), written at once and answered in one round
// trip. The nodes are renewed concurrently, one goroutine per node with a
// round in flight, so a slow or frozen node delays no other node's
// renewals.
//
// The scheduler waits for a node's round for one interval. A round not
// answered by then counts as timed out: its outcome is unknown, so its
// locks count as failed and are retried (and a late reply is still used).
// No second round is ever sent to a node while one is in flight, so
// nothing piles up behind a frozen node (go-redis does not apply a context
// deadline to a read unless ContextTimeoutEnabled is set, so a frozen node
// holds a round for its ReadTimeout, times its retries). A tick that comes
// due while a node's round is in flight is not skipped: that node's next
// round starts the moment the previous one ends, so a slow node is renewed
// as often as it can answer, not every other interval.
//
// Scripts in a pipeline have no NOSCRIPT fallback of their own: the first
// call of the first pipeline to a node (or after a round it did not
// answer) is an EVAL, which caches the script for the EVALSHAs behind it,
// so a new or promoted node costs no extra round trip; the calls a server
// answers NOSCRIPT (restarted, SCRIPT FLUSH) are sent again in a second
// pipeline, the first of them as EVAL. On a cluster, a call answered MOVED or ASK
// (a slot that moved) is sent again through the ClusterClient, which
// follows the redirection, and any failure or timeout makes the
// ClusterClient reload its slot map, so renewal follows a failover within
// the retry interval. A client that cannot pipeline (any other
// redis.Scripter) gets one Script.Run call per batch.
//
// The scheduler's own work per tick grows with the locks it renews, not with
// its wake-ups: a renewed lock is moved, in O(1), to the cohort of locks
// whose lease the same round extended; cohorts sit in a heap by when they
// run out, and the timer wakes only for the next tick, a retry, a round's
// bound, or the first cohort to run out, never to scan every lock. There is
// no goroutine or timer per lock; the scheduler's goroutines exist only
// while something is registered or a round is in flight.
//
// # Loss
//
// Loss is reported, never swallowed, with its cause. A lock found not held
// at renewal (expired, force-unlocked, Redis restarted or failed over) is
// reported to its holder at once ("no longer held by this owner at
// renewal"). A renewal that fails (an error, or no reply within the
// interval) is retried every retry interval until the lease has certainly
// run out, counted from the moment the last successful renewal was sent;
// then the lock is reported lost even if a renewal is still in flight
// ("ran out while renewal failed: " and the last error). A lease that runs
// out before any renewal could reach its node (added while the node's
// round was stuck) says so ("ran out before a renewal could reach" the
// node). Every report wraps rlock.ErrLockLost.
package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
)

// Defaults.
const (
	DefaultLease     = 30 * time.Second
	DefaultBatchSize = 100
)

// Option configures a Scheduler. A nil Option is ignored.
type Option func(*Scheduler) error

// WithLease sets the lease each renewal sets (default DefaultLease). It must
// be at least 3 ms.
func WithLease(d time.Duration) Option {
	return func(s *Scheduler) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: watchdog lease %v is less than 3ms", rlock.ErrInvalidArgument, d)
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
			return fmt.Errorf("%w: watchdog interval %v is not positive", rlock.ErrInvalidArgument, d)
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
			return fmt.Errorf("%w: watchdog batch size %d is not in [1, 10000]", rlock.ErrInvalidArgument, n)
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
	route    router
	lease    time.Duration
	leaseArg string // the lease in milliseconds, the script's argument
	interval time.Duration
	retry    time.Duration
	batch    int
	log      *slog.Logger

	ctx    context.Context // of every renewal; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	all     []*Lease   // every registered lease
	cohorts cohortHeap // the leases by when they run out (see expiry.go)
	lastAdd *cohort    // the cohort of the latest Add
	running bool       // the loop goroutine exists
	wake    chan struct{}
	closing chan struct{}
	closed  bool
	wg      sync.WaitGroup
	stats   Stats

	seq uint64 // node rounds started; owned by the loop goroutine

	idle *sync.Cond // on mu; broadcast when a round's requests are answered
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
	c          *cohort   // runs out with it: at base + lease, or up to addMerge earlier
	prev, next *Lease    // in c's list

	// Owned by the loop goroutine.
	inflight atomic.Int32 // rounds carrying it whose requests are not answered yet

	lastErr error  // why the last renewal round failed; nil after a success
	node    string // the node the last round was meant for
	mark    uint64 // the last round it was put in (drops duplicates)
}

// Stats counts what a scheduler has done.
type Stats struct {
	Registered int    // locks registered now
	Rounds     uint64 // renewal rounds dispatched (ticks and retries)
	RoundTrips uint64 // renewal requests: one pipeline per node per round, plus fallbacks (NOSCRIPT, redirects), or one per batch where the client cannot pipeline
	Renewed    uint64 // leases renewed
	Lost       uint64 // losses reported
	Errors     uint64 // node rounds that failed with an error
	Timeouts   uint64 // node rounds not answered within the interval (retried; their reply is still used if it comes before the lease runs out)

	// Late counts node rounds of a tick that had to wait for that node's
	// previous round to end; they start the moment it does.
	Late uint64
	// Ticks, TickTime and MaxTickTime measure the ticks whose every node
	// round has ended: how many, their total and their longest duration,
	// from the tick to the last node's reply.
	Ticks       uint64
	TickTime    time.Duration
	MaxTickTime time.Duration
}

// New returns a scheduler that renews through rdb: a *redis.Client, a
// *redis.ClusterClient or a *redis.Ring is renewed node by node as the
// package doc says; any other redis.Scripter is treated as one server. New
// does no I/O and starts no goroutine until the first Add. It reports
// ErrInvalidArgument for a nil rdb or a bad option.
func New(rdb redis.Scripter, opts ...Option) (*Scheduler, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", rlock.ErrInvalidArgument)
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
		return nil, fmt.Errorf("%w: watchdog interval %v is not less than the lease %v", rlock.ErrInvalidArgument, s.interval, s.lease)
	}
	s.retry = min(max(s.interval/4, time.Millisecond), time.Second)
	s.leaseArg = strconv.FormatInt(s.lease.Milliseconds(), 10)
	s.route = newRouter(rdb)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// LeaseDuration returns the lease each renewal sets.
func (s *Scheduler) LeaseDuration() time.Duration { return s.lease }

// Interval returns the time between renewal rounds.
func (s *Scheduler) Interval() time.Duration { return s.interval }

// Add registers a lock for renewal: key is the lock hash, field the owner
// field that holds it, and sent the moment the acquire that set the current
// lease was sent (the lease is counted from there). lost is called once, from
// a scheduler goroutine, if the lock is found lost; it must not block. The
// registration ends with Stop, with loss, or with Close. Add after Close
// reports lost at once with rlock.ErrClosed.
func (s *Scheduler) Add(key, field string, sent time.Time, lost func(error)) *Lease {
	l := &Lease{s: s, key: key, field: field, keyArg: key, fieldArg: field, lost: lost, pos: -1, base: sent}
	if s.route.slotted() {
		l.slot = rlock.Slot(key)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lost(fmt.Errorf("%w: %w", rlock.ErrLockLost, rlock.ErrClosed))
		return l
	}
	earlier := s.register(l, sent.Add(s.lease))
	switch {
	case !s.running:
		s.running = true
		s.wg.Add(1)
		go newLoop(s).run()
	case earlier: // the loop's timer may be set later
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
	s.mu.Lock()
	if l.pos >= 0 {
		s.unregister(l)
	}
	s.mu.Unlock()
}

// StopAndWait is Stop, then waits until every renewal of the lock already
// on its way is answered (as long as that round trip takes), so that a
// command the caller sends next runs after it on the server: a renewal must
// not restore the watchdog's lease over an explicit one set next.
func (l *Lease) StopAndWait() {
	s := l.s
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
		}
		s.all, s.cohorts, s.lastAdd = nil, nil, nil
		close(s.closing)
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Stats returns a snapshot of the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Registered = len(s.all)
	return st
}
