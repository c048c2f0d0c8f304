package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// IsLocked reports whether any owner holds the lock; for a side of a
// read-write lock, whether it has a live holder of that side.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if err := base.CheckContext(ctx); err != nil {
		return false, err
	}
	if side, ok := l.kind.(rwSide); ok {
		s, err := l.c.RWState(ctx, l.name)
		return err == nil && side.lockedIn(s), err
	}
	n, err := l.c.rdb.Exists(ctx, l.name).Result()
	if err != nil {
		return false, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	return n == 1, nil
}

// HoldCount returns how many holds the caller's owner has on the lock.
//
// Like every call of the owner it waits for the owner's call in flight, and
// first settles an earlier call whose outcome is unknown: a hold such a
// call may have taken, and that is being given back, is never reported.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	o, err := l.lockOwner(ctx)
	if err != nil {
		return 0, err
	}
	defer l.unlockOwner(o)
	if o.unsure {
		if err := l.settleLocked(ctx, o); err != nil {
			return 0, err
		}
		return int(o.count), nil
	}
	n, err := l.serverHolds(ctx, o.key.field)
	if err != nil {
		return 0, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	return int(n), nil
}

// serverHolds returns the hold count of field on the server: the hash
// field's value, or what the kind counts (a reader's live holds).
func (l *Lock) serverHolds(ctx context.Context, field string) (int64, error) {
	if k, ok := l.kind.(counted); ok {
		return l.c.runCall(ctx, k.holds(field)).Int64()
	}
	n, err := l.c.rdb.HGet(ctx, l.name, field).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// TTL returns the lock's remaining lease, whoever holds it.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := base.CheckContext(ctx); err != nil {
		return 0, err
	}
	d, err := l.c.rdb.PTTL(ctx, l.name).Result()
	if err != nil {
		return 0, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	ttl, exists := pttl(d)
	switch {
	case !exists:
		return 0, nil
	case ttl < 0:
		return 0, fmt.Errorf("%w: %q", base.ErrNoExpiry, l.name)
	}
	return ttl, nil
}

// pttl reads a PTTL reply as go-redis returns it: whether the key exists
// (-2: it does not; some servers' -2 arrives scaled to milliseconds), and
// its TTL, negative for a key without expiry.
func pttl(d time.Duration) (ttl time.Duration, exists bool) {
	switch {
	case d == -2 || d == -2*time.Millisecond:
		return 0, false
	case d < 0:
		return -1, true
	}
	return d, true
}

// QueuedWaiter is one entry of a fair lock's queue.
type QueuedWaiter struct {
	Owner    string
	Deadline time.Time // zero: none
}

// Queue returns a fair lock's queue, first in line first, and the server's
// time when it was read.
func (l *Lock) Queue(ctx context.Context) ([]QueuedWaiter, time.Time, error) {
	if err := base.CheckContext(ctx); err != nil {
		return nil, time.Time{}, err
	}
	k, ok := l.kind.(lined)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("%w: %q is not a fair lock", base.ErrInvalidArgument, l.name)
	}
	res, err := l.c.runCall(ctx, k.line()).Slice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("rlock: reading the queue of %q: %w", l.name, err)
	}
	q, now, ok := parseQueue(res)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("%w: queue script replied %v", base.ErrUnexpectedReply, res)
	}
	return q, now, nil
}

// parseQueue recognises the queue script's reply: the server's time (unix
// ms), then an owner and its deadline (unix ms, negative for none) for
// each waiter, first in line first.
func parseQueue(res []any) ([]QueuedWaiter, time.Time, bool) {
	if len(res)%2 != 1 {
		return nil, time.Time{}, false
	}
	now, ok := res[0].(int64)
	if !ok {
		return nil, time.Time{}, false
	}
	out := make([]QueuedWaiter, 0, len(res)/2)
	for i := 1; i < len(res); i += 2 {
		owner, ok1 := res[i].(string)
		ms, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return nil, time.Time{}, false
		}
		w := QueuedWaiter{Owner: owner}
		if ms >= 0 {
			w.Deadline = time.UnixMilli(ms)
		}
		out = append(out, w)
	}
	return out, time.UnixMilli(now), true
}

// Done returns a channel closed when the holding this handle last
// took part in ends.
func (l *Lock) Done() <-chan struct{} {
	if hp := l.last.Load(); hp != nil {
		return hp.done()
	}
	return closedChan
}

// Ctx returns the holding this handle last took part in as a
// context, cancelled when it ends (see holding.ctx); before the first
// acquisition, a cancelled context.
func (l *Lock) Ctx() context.Context {
	if hp := l.last.Load(); hp != nil {
		return hp.ctx
	}
	return endedCtx
}

// Until returns the time up to which the holding this handle last
// took part in is known to last; the zero time when it ended or before the
// first acquisition.
func (l *Lock) Until() time.Time {
	if hp := l.last.Load(); hp != nil {
		return hp.knownUntil()
	}
	return time.Time{}
}

// Err returns why the holding this handle last took part in ended,
// or nil.
func (l *Lock) Err() error {
	if hp := l.last.Load(); hp != nil {
		return hp.err()
	}
	return nil
}

// Token returns the fencing token of the holding this handle last
// took part in, 0 if none.
func (l *Lock) Token() int64 {
	if hp := l.last.Load(); hp != nil {
		return hp.token
	}
	return 0
}

var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
