package core

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/base"
)

// Kind selects a lock algorithm.
type Kind int

const (
	// Reentrant is Redisson's RLock.
	Reentrant Kind = iota
	// Fair is Redisson's RFairLock: reentrant, granted in arrival order.
	Fair
)

// DefaultQueueTimeout is how long a fair-lock waiter keeps its place
// without renewing it, unless configured otherwise.
const DefaultQueueTimeout = 30 * time.Second

// LockConfig configures a lock handle. The public packages validate it.
type LockConfig struct {
	Kind         Kind
	Lease        time.Duration // base.WatchdogMode or positive
	QueueTimeout time.Duration // fair only; 0: DefaultQueueTimeout
	Fencing      bool          // issue fencing tokens
}

// Lock is the engine behind a reentrant or fair lock handle.
type Lock struct {
	c       *Client
	name    string
	lease   time.Duration // the handle's lease setting
	kind    kind
	ownerID string // the handle's own owner ID
	field   string // the handle's own owner field: client ID, ":", ownerID
	latch   string // the latch key of field (see latchOf)
	last    atomic.Pointer[holding]
}

// NewLock returns the engine of a handle on the lock called name. It does
// no I/O.
func (c *Client) NewLock(name string, cfg LockConfig) (*Lock, error) {
	if err := base.ValidateName(name); err != nil {
		return nil, err
	}
	if err := base.CheckLease(cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	id := "#" + strconv.FormatUint(c.handles.Add(1), 10)
	return &Lock{
		c:       c,
		name:    name,
		lease:   cfg.Lease,
		kind:    newKind(name, cfg),
		ownerID: id,
		field:   c.id + ":" + id,
		latch:   base.DerivedKey(base.LatchPrefix, name) + ":" + c.id + ":" + id,
	}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Lease returns the handle's lease setting.
func (l *Lock) Lease() time.Duration { return l.lease }

// Owner returns the owner field for ctx: the explicit owner carried by
// ctx, or this handle's own.
func (l *Lock) Owner(ctx context.Context) (string, error) {
	if err := base.CheckContext(ctx); err != nil {
		return "", err
	}
	id, ok, err := base.OwnerFrom(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		return l.field, nil
	}
	return l.c.id + ":" + id, nil
}

// Lock blocks until the caller's owner holds the lock (see the public
// packages for the contract).
func (l *Lock) Lock(ctx context.Context) error { return l.lock(ctx, true, l.lease) }

// TryLock makes one attempt.
func (l *Lock) TryLock(ctx context.Context) error { return l.lock(ctx, false, l.lease) }

// LockLease is Lock with lease for this acquisition.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.lock(ctx, true, lease)
}

// TryLockLease is TryLock with lease for this acquisition.
func (l *Lock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return l.lock(ctx, false, lease)
}

func (l *Lock) lock(ctx context.Context, wait bool, lease time.Duration) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	field, err := l.Owner(ctx)
	if err != nil {
		return err
	}
	if err := l.ready(ctx); err != nil {
		return err
	}
	o := l.c.owner(l.name, field)
	defer l.c.putOwner(o)
	if wait {
		return l.wait(ctx, o, lease)
	}
	return l.tryOnce(ctx, o, lease)
}

// tryOnce is TryLock: one attempt, which never queues.
func (l *Lock) tryOnce(ctx context.Context, o *ownerState, lease time.Duration) error {
	out, err := l.attempt(ctx, o, request{lease: lease})
	if err == nil && out.kind != acquired {
		err = l.notObtained()
	}
	return err
}

func (l *Lock) ready(ctx context.Context) error {
	if l.c.closed.Load() {
		return base.ErrClosed
	}
	if ctx.Err() != nil {
		return l.ctxErr(ctx)
	}
	return nil
}

func (l *Lock) notObtained() error {
	return fmt.Errorf("%w: %q is held by another owner", base.ErrNotObtained, l.name)
}

func (l *Lock) ctxErr(ctx context.Context) error {
	return fmt.Errorf("rlock: waiting for %q: %w", l.name, ctx.Err())
}
