package rwlock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
)

// DefaultWriterWait is how long a waiting writer keeps new readers out
// without renewing its place, unless WithWriterWait says otherwise. A live
// waiting writer renews it every third of it.
const DefaultWriterWait = core.DefaultWriterWait

// RWLock is a handle on one read-write lock: its read side (ReadLock) and
// its write side (WriteLock), and queries on the whole. Create it with
// New; it is cheap, does no I/O, and is safe for concurrent use. The
// RWLock is the default owner of both sides: its read and write handles
// share one owner ID and one order among the goroutines that share the
// RWLock (readers together, a writer alone, as with sync.RWMutex), so a
// writer that takes the read lock with the write holding's Ctx downgrades,
// and another RWLock on the same name is another owner. Carry an explicit
// owner with rlock.WithOwner to share an owner across RWLocks.
type RWLock struct {
	c     *core.Client
	name  string
	read  *ReadLock
	write *WriteLock
}

// Option configures an RWLock. A nil Option is ignored.
type Option func(*config) error

type config struct {
	lease      time.Duration
	fencing    bool
	writerWait time.Duration
}

// WithLease gives both sides an explicit lease: every acquisition sets its
// hold's lease to d and nothing renews it (a read hold's own timeout key,
// a write hold's lock hash), so the hold ends when d runs out even if its
// holder is still working. d must be at least 1 ms, or rlock.WatchdogMode
// for the default: the client's watchdog lease (30 s), renewed by the
// client's watchdog (every 10 s) for as long as the hold lasts.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		c.lease = d
		return nil
	}
}

// WithFencing makes every write grant that takes the lock from free (or
// from readers) to written draw a fencing token, strictly larger than any
// drawn before on the name, from the counter "redisson_lock_token:{name}"
// that the reentrant lock of the same name uses too; WriteLock.Token
// returns it. Re-entry keeps the token; read holds carry none. Give every
// RWLock on a name this option.
func WithFencing() Option {
	return func(c *config) error {
		c.fencing = true
		return nil
	}
}

// WithWriterWait sets T, how long a waiting writer keeps new readers out
// without renewing its place; default DefaultWriterWait (10 s). A writer
// blocked in Lock renews its place at least every T/3, however long it
// waits, so only a writer whose process died (or stalled for T) stops
// keeping readers out: the readers it kept out wait at most T after its
// last attempt. T also bounds a writer's wait (see the package doc): a
// writer that finds readers is granted within D + T/3, D the longest
// remaining hold of the readers it found. d must be at least 3 ms. Give
// every RWLock on a name the same T.
func WithWriterWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: writer wait %v is less than 3ms", rlock.ErrInvalidArgument, d)
		}
		c.writerWait = d
		return nil
	}
}

// New returns a handle on the read-write lock called name (the name is the
// Redis key of the lock hash, as for Redisson's RReadWriteLock), run
// through client c (the client every lock kind shares). It does no I/O. It
// reports rlock.ErrInvalidArgument for a nil client, a bad name or a bad
// option.
func New(c *rlock.Client, name string, opts ...Option) (*RWLock, error) {
	cc, ok := core.Of(c)
	if !ok {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	cfg := config{writerWait: DefaultWriterWait}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	side := core.LockConfig{Lease: cfg.lease, Fencing: cfg.fencing, WriterWait: cfg.writerWait}
	r, w, err := cc.NewRWLock(name, side, side)
	if err != nil {
		return nil, err
	}
	return &RWLock{c: cc, name: name, read: &ReadLock{handle{r}}, write: &WriteLock{handle{w}}}, nil
}

// Name returns the lock's name.
func (l *RWLock) Name() string { return l.name }

// ReadLock returns the read side: shared by any number of owners. The same
// value on every call.
func (l *RWLock) ReadLock() *ReadLock { return l.read }

// WriteLock returns the write side: exclusive. The same value on every
// call.
func (l *RWLock) WriteLock() *WriteLock { return l.write }

// Holder is one holder of a read-write lock.
type Holder struct {
	// Owner is the holder's owner field, "<clientID>:<ownerID>" (what
	// Owner returns on its handles; a writer's hash field adds ":write").
	Owner string
	// Holds is its hold count.
	Holds int
	// Lease is its remaining lease: a reader's longest remaining read
	// hold, a writer's the lock's TTL; negative for no expiry.
	Lease time.Duration
}

// WaitingWriter is a writer that waits for the readers to leave and keeps
// new readers out meanwhile.
type WaitingWriter struct {
	// Owner is the writer's owner field, "<clientID>:<ownerID>".
	Owner string
	// Remaining is how long it keeps readers out unless it renews its
	// place (a live waiting writer does, every third of its writer wait).
	Remaining time.Duration
}

// State is one consistent view of a read-write lock, read in one script
// call.
type State struct {
	// Mode is "read", "write" or "" (free).
	Mode string
	// Readers are the live readers, sorted by owner. In write mode, they
	// are the writer's own read holds (a downgrade in progress).
	Readers []Holder
	// Writer is the writer, when Writing; Writing is false when no
	// writer holds the lock.
	Writer  Holder
	Writing bool
	// Waiting are the live waiting writers, first to run out first.
	Waiting []WaitingWriter
}

// State reads the lock's readers, writer and waiting writers, in one
// consistent view. It changes nothing (readers whose leases ran out are
// left out, not removed). On error it returns the Redis error, or ctx's.
func (l *RWLock) State(ctx context.Context) (State, error) {
	s, err := l.c.RWState(ctx, l.name)
	if err != nil {
		return State{}, err
	}
	out := State{Mode: s.Mode}
	for _, r := range s.Readers {
		out.Readers = append(out.Readers, Holder{Owner: r.Field, Holds: int(r.Holds), Lease: r.TTL})
	}
	if s.Writer != nil {
		out.Writing = true
		out.Writer = Holder{Owner: strings.TrimSuffix(s.Writer.Field, base.WriterFieldSuffix), Holds: int(s.Writer.Holds), Lease: s.Writer.TTL}
	}
	for _, w := range s.Waiting {
		out.Waiting = append(out.Waiting, WaitingWriter{
			Owner:     strings.TrimSuffix(w.Owner, base.WriterFieldSuffix),
			Remaining: w.Deadline.Sub(s.Now),
		})
	}
	return out, nil
}

// Readers returns the live readers with their hold counts and remaining
// leases (see State).
func (l *RWLock) Readers(ctx context.Context) ([]Holder, error) {
	s, err := l.State(ctx)
	return s.Readers, err
}

// Writer returns the writer, and false when no writer holds the lock (see
// State).
func (l *RWLock) Writer(ctx context.Context) (Holder, bool, error) {
	s, err := l.State(ctx)
	return s.Writer, s.Writing, err
}

// WaitingWriters returns the writers that wait for readers to leave and
// keep new readers out meanwhile (see State).
func (l *RWLock) WaitingWriters(ctx context.Context) ([]WaitingWriter, error) {
	s, err := l.State(ctx)
	return s.Waiting, err
}

// IsLocked reports whether any owner holds the lock, reading or writing.
func (l *RWLock) IsLocked(ctx context.Context) (bool, error) {
	s, err := l.State(ctx)
	return s.Writing || len(s.Readers) > 0, err
}

// ForceUnlock deletes the lock in whatever mode, whoever holds it (the
// readers' timeout keys with it), and wakes every waiter. It reports
// whether there was a lock to delete. Waiting writers keep their places.
// Holders learn of it from their watchdog (Done closes, Err wraps
// rlock.ErrLockLost) or at their next Unlock (rlock.ErrNotHeld). Like
// Unlock it runs to completion even when ctx is cancelled, and takes
// effect once if re-sent.
func (l *RWLock) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := l.c.ForceUnlockRW(ctx, l.name)
	return n == 1, err
}
