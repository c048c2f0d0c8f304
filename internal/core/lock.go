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
	// Read is the read side of Redisson's RReadWriteLock: shared.
	Read
	// Write is the write side of Redisson's RReadWriteLock: exclusive,
	// and not starved by readers (see WriterWait).
	Write
)

// DefaultQueueTimeout is how long a fair-lock waiter keeps its place
// without renewing it, unless configured otherwise.
const DefaultQueueTimeout = 30 * time.Second

// DefaultThreadWait is a fair lock's thread wait time unless configured
// otherwise: Redisson's default fairLockWaitTimeout, 5 min.
const DefaultThreadWait = 5 * time.Minute

// DefaultWriterWait is how long a waiting writer of a read-write lock
// keeps new readers out without renewing its entry, unless configured
// otherwise.
const DefaultWriterWait = 10 * time.Second

// LockConfig configures a lock handle. The public packages validate it.
type LockConfig struct {
	Kind         Kind
	Lease        time.Duration // base.WatchdogMode or positive
	QueueTimeout time.Duration // fair only; 0: DefaultQueueTimeout
	// ThreadWait is the fair queue's thread wait time (Redisson's
	// fairLockWaitTimeout; see fair_common.lua); 0: DefaultThreadWait.
	ThreadWait time.Duration
	WriterWait time.Duration // read-write only; 0: DefaultWriterWait
	Fencing    bool          // issue fencing tokens
}

// Lock is the engine behind a reentrant or fair lock handle.
type Lock struct {
	c        *Client
	name     string
	lease    time.Duration // the handle's lease setting
	kind     kind
	ownerID  string // the handle's own owner ID
	ownField string // the handle's own owner: client ID, ":", ownerID
	// ownKind is kind.field(ownField): the field of the own owner's
	// holds of this kind, computed once.
	ownKind string
	latch   string // the lock's latch key, shared by its owners' releases (see latchOf)
	last    atomic.Pointer[holding]
	// gate orders the goroutines that act for the handle's own owner
	// (see Gate); the read and write handle of one read-write lock
	// share it.
	gate      *Gate
	exclusive bool // takes the gate's exclusive pass (every kind but Read)
	// nameArg and ownKindArg are name and ownKind boxed once, for the
	// watchdog's registrations (see watch).
	nameArg, ownKindArg any
	// spare is the state of the handle's own owner on this lock once the
	// client forgot it, for its next call to take up (see Client.owner);
	// guarded by the client's mu.
	spare *ownerState
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
	if cfg.WriterWait == 0 {
		cfg.WriterWait = DefaultWriterWait
	}
	id := "#" + strconv.FormatUint(c.handles.Add(1), 10)
	k := newKind(name, cfg)
	own := c.id + ":" + id
	l := &Lock{
		c:         c,
		name:      name,
		lease:     cfg.Lease,
		kind:      k,
		ownerID:   id,
		ownField:  own,
		ownKind:   k.field(own),
		nameArg:   name,
		latch:     base.DerivedKey(base.LatchPrefix, name),
		gate:      NewGate(),
		exclusive: cfg.Kind != Read,
	}
	l.ownKindArg = l.ownKind
	return l, nil
}

// NewRWLock returns the engines of the read and the write handle of the
// read-write lock called name. Both use one default owner, so that the
// handle pair of one read-write lock is one owner (a writer that takes
// the read lock downgrades). read and write configure each side; their
// Kind is set here. It does no I/O.
func (c *Client) NewRWLock(name string, read, write LockConfig) (r, w *Lock, err error) {
	read.Kind, write.Kind = Read, Write
	if r, err = c.NewLock(name, read); err != nil {
		return nil, nil, err
	}
	if w, err = c.NewLock(name, write); err != nil {
		return nil, nil, err
	}
	w.ownerID, w.ownField, w.gate = r.ownerID, r.ownField, r.gate
	w.ownKind = w.kind.field(w.ownField)
	w.ownKindArg = w.ownKind
	return r, w, nil
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
		return l.ownField, nil
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

// home returns l if field is the field of the handle's own owner, nil
// otherwise (see Client.owner).
func (l *Lock) home(field string) *Lock {
	if field == l.ownKind {
		return l
	}
	return nil
}

// field returns the hash field of the caller's owner's holds of this kind.
func (l *Lock) field(ctx context.Context) (string, error) {
	owner, err := l.Owner(ctx)
	if owner == l.ownField {
		return l.ownKind, err
	}
	return l.kind.field(owner), err
}

func (l *Lock) lock(ctx context.Context, wait bool, lease time.Duration) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	field, err := l.field(ctx)
	if err != nil {
		return err
	}
	if err := l.ready(ctx); err != nil {
		return err
	}
	pass, err := l.enterGate(ctx, wait)
	if err != nil {
		return err
	}
	o := l.c.owner(l.home(field), l.name, field)
	defer l.c.putOwner(o)
	if wait {
		err = l.wait(ctx, o, lease)
	} else {
		err = l.tryOnce(ctx, o, lease)
	}
	pass.done(err)
	return err
}

// gatePass is what a Lock call took at the handle's gate: nothing for an
// explicit owner (rlock.WithOwner), a re-entry, or a pass.
type gatePass struct {
	g                  *Gate
	exclusive, reentry bool
}

// enterGate takes the caller's way past the gate: a caller acting for the
// handle's own owner with a ctx that does not descend from a holding of it
// waits for a pass (TryLock: fails at once when none is free).
func (l *Lock) enterGate(ctx context.Context, wait bool) (gatePass, error) {
	if l.explicitOwner(ctx) {
		return gatePass{}, nil
	}
	pass := gatePass{g: l.gate, exclusive: l.exclusive}
	if Reenters(ctx, l.gate) {
		pass.reentry = true
		return pass, nil
	}
	ok, err := l.gate.Enter(ctx, l.exclusive, wait)
	switch {
	case err != nil:
		return gatePass{}, fmt.Errorf("rlock: waiting for %q: %w", l.name, err)
	case !ok:
		return gatePass{}, l.notObtained()
	}
	return pass, nil
}

// done records the Lock call's outcome at the gate.
func (p gatePass) done(err error) {
	switch {
	case p.g == nil:
	case err == nil:
		p.g.Granted(p.exclusive, p.reentry)
	case !p.reentry:
		p.g.Leave(p.exclusive)
	}
}

// explicitOwner reports whether ctx names an owner (rlock.WithOwner).
func (l *Lock) explicitOwner(ctx context.Context) bool {
	_, ok, _ := base.OwnerFrom(ctx)
	return ok
}

// tryOnce is TryLock: one attempt, which never queues.
func (l *Lock) tryOnce(ctx context.Context, o *ownerState, lease time.Duration) error {
	start := l.c.ev.now()
	out, err := l.attempt(ctx, o, request{lease: lease})
	if err == nil && out.kind != acquired {
		err = l.notObtained()
	}
	l.acquireDone(o, start, false, false, err)
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
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		// A holding's Ctx that ended by loss: say so (ErrLockLost).
		return fmt.Errorf("rlock: waiting for %q: %w: %w", l.name, ctx.Err(), cause)
	}
	return fmt.Errorf("rlock: waiting for %q: %w", l.name, ctx.Err())
}
