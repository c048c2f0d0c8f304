// Package watchdog renews the leases of held locks: one scheduler per
// client, whatever the number of locks it holds.
//
// A lock taken without an explicit lease gets the watchdog lease (30 s by
// default) and is registered with the scheduler. Every interval (lease/3
// by default) the scheduler renews every registered lock, in batches of up
// to 100 keys per round trip (grouped by hash slot on Redis Cluster), using
// one script call per batch. There is no goroutine or timer per lock: one
// goroutine keeps the time and one does the I/O, and both exist only while
// something is registered.
//
// Scripts are sent with Script.Run (EVALSHA, then EVAL on NOSCRIPT), one
// call per batch, never in a pipeline, so a promoted replica's empty script
// cache costs one extra round trip. On a *redis.ClusterClient a failed
// renewal also makes the client reload its slot map, so renewal follows a
// failover within the retry interval instead of failing until go-redis
// notices on its own.
//
// Loss is reported, never swallowed. A lock found not held at renewal
// (expired, force-unlocked, Redis restarted or failed over) is reported to
// its holder at once with an error wrapping rlock.ErrLockLost. A renewal
// that fails (timeout, connection refused, ...) is retried every retry
// interval until the lease has certainly run out, counted from the moment
// the last successful renewal was sent; then the lock is reported lost,
// even if a renewal is still in flight.
package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/scripts"
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
// must be positive and less than the lease.
func WithInterval(d time.Duration) Option {
	return func(s *Scheduler) error {
		if d <= 0 {
			return fmt.Errorf("%w: watchdog interval %v is not positive", rlock.ErrInvalidArgument, d)
		}
		s.interval = d
		return nil
	}
}

// WithBatchSize sets how many locks one renewal round trip carries at most
// (default DefaultBatchSize). It must be between 1 and 10000.
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
	rdb      redis.Scripter
	lease    time.Duration
	interval time.Duration
	retry    time.Duration
	batch    int
	cluster  bool
	log      *slog.Logger

	mu       sync.Mutex
	entries  map[*Lease]struct{}
	running  bool      // the timing goroutine exists
	busy     bool      // a renewal round is in flight
	failing  bool      // some renewal failed; retry at retryAt
	retryAt  time.Time // when to retry failed renewals
	nextTick time.Time // next full renewal round
	wake     chan struct{}
	closing  chan struct{}
	closed   bool
	wg       sync.WaitGroup
	stats    Stats
	idle     *sync.Cond // on mu; broadcast when a renewal is answered
}

// Lease is one lock's registration with the scheduler.
type Lease struct {
	s        *Scheduler
	key      string
	field    string
	expires  time.Time // when the lease has certainly run out
	failing  bool
	lost     func(error)
	inflight bool // a renewal of it is on its way; guarded by Scheduler.mu
}

// Stats counts what a scheduler has done.
type Stats struct {
	Registered int    // locks registered now
	Rounds     uint64 // renewal rounds run (full ticks and retries)
	RoundTrips uint64 // renewal script calls sent
	Renewed    uint64 // leases renewed
	Lost       uint64 // losses reported
	Errors     uint64 // failed renewal calls
}

// New returns a scheduler that renews through rdb. It does no I/O and
// starts no goroutine until the first Add. It reports ErrInvalidArgument
// for a nil rdb or a bad option.
func New(rdb redis.Scripter, opts ...Option) (*Scheduler, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", rlock.ErrInvalidArgument)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	s := &Scheduler{
		rdb:     rdb,
		lease:   DefaultLease,
		batch:   DefaultBatchSize,
		cluster: cluster,
		log:     slog.New(slog.DiscardHandler),
		entries: make(map[*Lease]struct{}),
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
	l := &Lease{s: s, key: key, field: field, expires: sent.Add(s.lease), lost: lost}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lost(fmt.Errorf("%w: %w", rlock.ErrLockLost, rlock.ErrClosed))
		return l
	}
	s.entries[l] = struct{}{}
	if !s.running {
		s.running = true
		s.nextTick = time.Now().Add(s.interval)
		s.wg.Add(2)
		jobs := make(chan []*Lease)
		go s.timeLoop(jobs)
		go s.ioLoop(jobs)
	}
	s.mu.Unlock()
	return l
}

// Stop ends the registration: the lock is no longer renewed. A renewal
// already in flight may still extend it, which is harmless when the lock
// is being released (renewal only extends a lock still held by the same
// owner field), but not when an explicit lease is set next: see
// StopAndWait. Stop is idempotent.
func (l *Lease) Stop() {
	s := l.s
	s.mu.Lock()
	delete(s.entries, l)
	s.mu.Unlock()
}

// StopAndWait is Stop, then waits until a renewal of the lock already on
// its way is answered (as long as that round trip takes), so that a
// command the caller sends next runs after it on the server: a renewal
// must not restore the watchdog's lease over an explicit one set next.
func (l *Lease) StopAndWait() {
	s := l.s
	s.mu.Lock()
	delete(s.entries, l)
	for l.inflight {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

// Close stops all renewal and waits for the scheduler's goroutines to exit.
// Registered locks are not reported lost; they expire within one lease
// unless released. Close is idempotent.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		clear(s.entries)
		close(s.closing)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Stats returns a snapshot of the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Registered = len(s.entries)
	return st
}

// timeLoop decides when to renew and reports leases that ran out. It exits
// when nothing is registered (Add starts a new one) or on Close.
func (s *Scheduler) timeLoop(jobs chan<- []*Lease) {
	defer s.wg.Done()
	defer close(jobs)
	timer := time.NewTimer(s.interval)
	defer timer.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-s.wake:
		case <-timer.C:
		}
		now := time.Now()
		var expired []*Lease
		var job []*Lease
		s.mu.Lock()
		if len(s.entries) == 0 && !s.busy {
			s.running = false
			s.mu.Unlock()
			return
		}
		full := !now.Before(s.nextTick)
		if full {
			s.nextTick = now.Add(s.interval)
		}
		retry := s.failing && !now.Before(s.retryAt)
		start := !s.busy && (full || retry)
		next := s.nextTick
		for l := range s.entries {
			if !now.Before(l.expires) {
				expired = append(expired, l)
				delete(s.entries, l)
				continue
			}
			next = earliest(next, l.expires)
			if start && (full || l.failing) {
				job = append(job, l)
			}
		}
		if start {
			s.failing = false
		}
		if len(job) > 0 {
			s.busy = true
			s.stats.Rounds++
		} else {
			job = nil
		}
		if s.failing && !s.busy { // while busy, ioLoop wakes us when done
			next = earliest(next, s.retryAt)
		}
		s.stats.Lost += uint64(len(expired))
		s.mu.Unlock()

		for _, l := range expired {
			l.lost(fmt.Errorf("%w: lease of %q ran out while renewal failed", rlock.ErrLockLost, l.key))
		}
		if job != nil {
			select {
			case jobs <- job:
			case <-s.closing:
				return
			}
		}
		timer.Reset(max(time.Until(next), 0))
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ioLoop runs renewal rounds handed over by timeLoop, one at a time.
func (s *Scheduler) ioLoop(jobs <-chan []*Lease) {
	defer s.wg.Done()
	for job := range jobs {
		s.renewAll(job)
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
		select { // let timeLoop schedule retries or exit
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// renewAll renews job in batches: per hash slot on a cluster (a script may
// only touch one slot), then chunks of at most s.batch keys.
func (s *Scheduler) renewAll(job []*Lease) {
	if s.cluster {
		slices.SortFunc(job, func(a, b *Lease) int { return rlock.Slot(a.key) - rlock.Slot(b.key) })
	}
	for len(job) > 0 {
		n := min(len(job), s.batch)
		if s.cluster {
			slot := rlock.Slot(job[0].key)
			n = 1
			for n < len(job) && n < s.batch && rlock.Slot(job[n].key) == slot {
				n++
			}
		}
		s.renewBatch(job[:n])
		job = job[n:]
	}
}

func (s *Scheduler) renewBatch(batch []*Lease) {
	s.mu.Lock()
	live := make([]*Lease, 0, len(batch))
	for _, l := range batch {
		if _, ok := s.entries[l]; ok {
			l.inflight = true
			live = append(live, l)
		}
	}
	s.mu.Unlock()
	if batch = live; len(batch) == 0 {
		return
	}
	keys := make([]string, len(batch))
	args := make([]any, len(batch)+1)
	args[0] = strconv.FormatInt(s.lease.Milliseconds(), 10)
	for i, l := range batch {
		keys[i] = l.key
		args[i+1] = l.field
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.interval)
	sent := time.Now()
	res, err := scripts.Renew.Run(ctx, s.rdb, keys, args...).Int64Slice()
	cancel()
	if err != nil && s.cluster {
		// After a failover go-redis keeps sending the slot to the dead
		// master (connection refused) until a MOVED reply or its state
		// reload interval (60 s by default), longer than a lease: ask it
		// to reload the slot map now (in the background, rate-limited by
		// go-redis), so the retry goes to the promoted replica.
		s.rdb.(*redis.ClusterClient).ReloadState(context.Background())
	}
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%w: renewal returned %d results for %d keys", rlock.ErrUnexpectedReply, len(res), len(batch))
	}

	var lost []*Lease
	s.mu.Lock()
	s.stats.RoundTrips++
	if err != nil {
		s.stats.Errors++
		s.failing = true
		s.retryAt = time.Now().Add(s.retry)
	}
	for i, l := range batch {
		if _, ok := s.entries[l]; !ok {
			continue // stopped or reported meanwhile
		}
		switch {
		case err != nil:
			l.failing = true
		case res[i] == 1:
			l.failing = false
			l.expires = sent.Add(s.lease)
			s.stats.Renewed++
		default:
			delete(s.entries, l)
			lost = append(lost, l)
		}
	}
	s.stats.Lost += uint64(len(lost))
	for _, l := range batch {
		l.inflight = false
	}
	s.idle.Broadcast()
	s.mu.Unlock()

	if err != nil {
		s.log.Warn("rlock watchdog: renewal failed; retrying until the leases run out",
			"locks", len(batch), "error", err)
	}
	for _, l := range lost {
		l.lost(fmt.Errorf("%w: %q was no longer held by this owner at renewal", rlock.ErrLockLost, l.key))
	}
}
