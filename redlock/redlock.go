package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

// DefaultNodeWait is the per-node wait when the context has no deadline
// and WithNodeWait was not given.
const DefaultNodeWait = multilock.DefaultReplyWait

// RedLock is a lock held on a quorum (n/2+1) of n independent Redis
// masters: a MultiLock in quorum mode over one reentrant lock per master.
// Create it with New; it is safe for concurrent use and does no I/O until
// a method is called. The RedLock handle is the default owner, as a
// reentrant handle is; rlock.WithOwner carries an explicit one.
type RedLock struct {
	name string
	m    *multilock.MultiLock
}

var (
	_ rlock.Locker      = (*RedLock)(nil)
	_ rlock.LeaseLocker = (*RedLock)(nil)
)

// Option configures a RedLock. A nil Option is ignored.
type Option func(*config)

type config struct {
	names []string
	opts  []multilock.Option // checked by multilock.New
}

// WithLease sets the lease of Lock and TryLock (LockLease and TryLockLease
// choose one per call): every node's lock expires d after it was granted
// and nothing renews it; the holder may rely on it until Until, which is d
// less the acquisition time and the clock drift allowance. d must be at
// least 1 ms, or rlock.WatchdogMode (0, the default): every node's lock
// gets its client's watchdog lease (30 s by default) and is renewed while
// held.
func WithLease(d time.Duration) Option {
	return func(c *config) { c.opts = append(c.opts, multilock.WithLease(d)) }
}

// WithNodeWait sets the per-node wait: how long one attempt waits for each
// node's answer. Default: the time left until the context's deadline
// divided by the number of nodes, at least 1 ms (Redisson's rule), or
// DefaultNodeWait when the context has no deadline. d must be positive.
func WithNodeWait(d time.Duration) Option {
	return func(c *config) { c.opts = append(c.opts, multilock.WithReplyWait(d)) }
}

// WithRetryDelay sets how long Lock waits between two attempts: a random
// time between lo and hi, so that competing clients do not retry in step.
// Default: 20 ms to 200 ms. Both must be positive and lo <= hi.
func WithRetryDelay(lo, hi time.Duration) Option {
	return func(c *config) { c.opts = append(c.opts, multilock.WithRetryDelay(lo, hi)) }
}

// WithNodeNames names the nodes in errors (for example by address), in
// the order of the clients given to New. Default: "node 0", "node 1", ...
func WithNodeNames(names ...string) Option {
	return func(c *config) { c.names = append([]string(nil), names...) }
}

// New returns a RedLock called name over nodes: one rlock client per Redis
// master. The masters must be independent (not replicas of each other, not
// shards of one cluster), or the quorum means nothing. It does no I/O.
// It reports rlock.ErrInvalidArgument for no nodes, a nil or repeated
// client, a bad name, WithNodeNames with the wrong count, or a bad option.
//
// Configure each node's go-redis client so that an unreachable node fails
// fast: see the package documentation.
func New(nodes []*rlock.Client, name string, opts ...Option) (*RedLock, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: a RedLock needs at least one node", rlock.ErrInvalidArgument)
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.names != nil && len(cfg.names) != len(nodes) {
		return nil, fmt.Errorf("%w: %d node names for %d nodes", rlock.ErrInvalidArgument, len(cfg.names), len(nodes))
	}
	members := make([]rlock.Locker, len(nodes))
	labels := make([]string, len(nodes))
	seen := make(map[*rlock.Client]int, len(nodes))
	for i, c := range nodes {
		if c == nil {
			return nil, fmt.Errorf("%w: node %d is nil", rlock.ErrInvalidArgument, i)
		}
		if j, ok := seen[c]; ok {
			return nil, fmt.Errorf("%w: nodes %d and %d are the same client", rlock.ErrInvalidArgument, j, i)
		}
		seen[c] = i
		l, err := reentrant.New(c, name)
		if err != nil {
			return nil, err
		}
		members[i], labels[i] = l, fmt.Sprintf("node %d", i)
		if cfg.names != nil {
			labels[i] = cfg.names[i]
		}
	}
	mopts := append([]multilock.Option{multilock.WithQuorum(len(nodes)/2 + 1), multilock.WithMemberNames(labels...)}, cfg.opts...)
	m, err := multilock.New(members, mopts...)
	if err != nil {
		return nil, err
	}
	return &RedLock{name: name, m: m}, nil
}

// Name returns the lock's name (its key on every node).
func (r *RedLock) Name() string { return r.name }

// Quorum returns how many nodes must grant the lock: n/2+1 of n.
func (r *RedLock) Quorum() int { return r.m.Quorum() }

// Lock blocks until the caller's owner holds the lock on a quorum of
// nodes, or ctx ends: attempts as TryLock's, a random retry delay
// (WithRetryDelay) between them, the per-node wait derived anew for every
// attempt from the time ctx has left. When ctx ends it returns an error
// wrapping ctx's error (never rlock.ErrNotObtained) and holds nothing more
// than before. Errors other than "not obtained" end it at once, and so
// does a failure on so many closed clients that no quorum is left. A nil
// ctx, a bad owner ID or a bad lease is rlock.ErrInvalidArgument, before
// any I/O (on every method). See multilock.MultiLock.Lock.
func (r *RedLock) Lock(ctx context.Context) error { return r.m.Lock(ctx) }

// TryLock makes one attempt: it asks every node in parallel and waits for
// each at most the per-node wait, so a node that is down or frozen delays
// it by that much at most. The lock is obtained when a quorum of nodes
// granted it and its validity (lease - elapsed - drift, see
// multilock.Drift; elapsed runs from the earliest request sent to a node
// that granted) is positive. Otherwise every node that granted is released
// again and the error is a *multilock.Error wrapping rlock.ErrNotObtained
// that lists each failed node and why; a node whose answer did not arrive
// gives back a late grant by itself. When ctx ends during the attempt it
// returns an error wrapping ctx's error instead, after the same clean-up.
// Re-locking a RedLock this handle holds for the caller's owner only
// counts one more hold (no I/O), as long as it is neither lost nor past
// its validity; each successful Lock or TryLock needs one Unlock.
func (r *RedLock) TryLock(ctx context.Context) error { return r.m.TryLock(ctx) }

// LockLease is Lock with lease for this acquisition instead of the
// WithLease setting: a lease of at least 1 ms, or rlock.WatchdogMode.
func (r *RedLock) LockLease(ctx context.Context, lease time.Duration) error {
	return r.m.LockLease(ctx, lease)
}

// TryLockLease is TryLock with lease for this acquisition instead of the
// WithLease setting.
func (r *RedLock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return r.m.TryLockLease(ctx, lease)
}

// SetLease changes the lease of the caller's owner's holding on every node
// that granted it, in parallel: a positive lease restarts the validity
// (Until) from now, rlock.WatchdogMode hands every node's lock to its
// watchdog. A node on which the owner held the lock before the RedLock
// took it (a re-entry) keeps its own lease; Until stays within it. It returns an error wrapping rlock.ErrNotHeld, without I/O,
// when this handle holds nothing for the owner, and a *multilock.Error
// wrapping rlock.ErrNotHeld when fewer than a quorum of nodes still held
// the lock. Like Unlock it runs to completion even when ctx is cancelled.
func (r *RedLock) SetLease(ctx context.Context, lease time.Duration) error {
	return r.m.SetLease(ctx, lease)
}

// Unlock releases one hold of the caller's owner; the last one releases
// the lock on every node that granted it, in parallel, and waits for all
// of them, even when ctx is cancelled. It returns an error wrapping
// rlock.ErrNotHeld, without I/O, when this handle holds nothing for the
// owner. After a loss (see Err) it returns that loss, wrapping
// rlock.ErrLockLost. When the release finds fewer than a quorum of nodes
// still holding the lock, it returns a *multilock.Error wrapping
// rlock.ErrNotHeld, and the holding period ends as lost.
func (r *RedLock) Unlock(ctx context.Context) error { return r.m.Unlock(ctx) }

// IsHeld asks every node, in parallel, and reports whether the caller's
// owner holds the lock on at least a quorum of them. It returns a
// *multilock.Error when failed nodes would decide the answer.
func (r *RedLock) IsHeld(ctx context.Context) (bool, error) { return r.m.IsHeld(ctx) }

// Until returns the time up to which the holding period of the last
// acquisition through this handle is known to last: with an explicit
// lease, the end of the validity (lease - elapsed - drift, restarted by
// SetLease), or earlier when it takes a node the owner held before, whose
// own lease is shorter; in watchdog mode the quorum-th latest of the nodes' watchdog
// leases, each counted from its last successful renewal, less the drift
// allowance; it moves on with every renewal. The zero time once the
// holding period ended, and before the first acquisition. Act only while
// time.Now().Before(Until()).
func (r *RedLock) Until() time.Time { return r.m.Until() }

// Done returns a channel that is closed when the holding period of the
// last acquisition through this handle ends: by the last Unlock, or by
// loss (see Err). Before the first acquisition it returns a closed channel.
func (r *RedLock) Done() <-chan struct{} { return r.m.Done() }

// Err returns nil while the holding period of the last acquisition goes on
// or when it ended by Unlock. After a loss it returns an error wrapping
// rlock.ErrLockLost: the validity of an explicit lease ran out, or so many
// nodes lost the lock (watchdog renewal found it gone, a node restarted,
// it was force-unlocked; also when the last Unlock finds it so) that fewer
// than a quorum still hold it; the error is then a *multilock.Error naming
// them.
func (r *RedLock) Err() error { return r.m.Err() }

// Ctx returns the holding period of the last acquisition through this
// handle as a context: cancelled when it ends, with context.Cause the
// error Err returns after a loss and context.Canceled after the last
// Unlock. Before the first acquisition it is already cancelled. See
// multilock.MultiLock.Ctx.
func (r *RedLock) Ctx() context.Context { return r.m.Ctx() }
