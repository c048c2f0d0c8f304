package latch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
)

// DefaultPoll is the longest Await waits between two looks at the count
// unless WithPoll says otherwise: a lost "0" message costs a waiter at
// most this long.
const DefaultPoll = time.Second

// Latch is a handle on one count-down latch. Create it with New; it is
// cheap, does no I/O, holds nothing, and is safe for concurrent use. Any
// number of handles, in any number of processes (rlock or Redisson), may
// share a latch by name.
type Latch struct {
	env     core.LatchEnv
	name    string
	channel string
	ops     string
	poll    time.Duration
}

// Option configures a Latch. A nil Option is ignored.
type Option func(*config) error

type config struct {
	poll time.Duration
}

// WithPoll sets the longest Await waits between two looks at the count.
// A count that reached zero is published ("0" on the latch's channel) and
// wakes waiters at once; the poll bounds what a lost message costs.
// Default DefaultPoll (1 s). It must be positive.
func WithPoll(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: latch poll %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.poll = d
		return nil
	}
}

// New returns a handle on the latch called name, run through client. It
// does no I/O. It reports rlock.ErrInvalidArgument for a nil client, a
// name that is empty, longer than 1024 bytes or has a stray brace, and a
// bad option.
func New(client *rlock.Client, name string, opts ...Option) (*Latch, error) {
	c, ok := core.Of(client)
	if !ok {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	if err := base.ValidateName(name); err != nil {
		return nil, err
	}
	cfg := config{poll: DefaultPoll}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Latch{
		env:     core.LatchEnvOf(c),
		name:    name,
		channel: base.LatchChannel(name),
		ops:     base.LatchOps(name),
		poll:    cfg.poll,
	}, nil
}

// Name returns the latch's name: the Redis key that holds its count.
func (l *Latch) Name() string { return l.name }

// TrySetCount sets the latch's count to n and reports true when the latch
// has no count (its key is absent, or holds 0), as Redisson's
// trySetCount; otherwise it changes nothing and reports false. A set
// publishes "1" (new count) on the latch's channel. n must be positive
// (else rlock.ErrInvalidArgument, before any I/O). It reports
// rlock.ErrWrongType when the key holds something else. A copy of the
// call re-sent by the Redis client after a lost reply sets nothing twice
// and is answered as the first was. If ctx ends while the call is in
// flight, it returns ctx's error and the count may or may not be set.
// A set that no replica acknowledged (replica sync, see the package doc)
// reports true with an error wrapping rlock.ErrMayBeLost: the count is set
// on the master and may vanish on failover.
func (l *Latch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if n <= 0 {
		return false, fmt.Errorf("%w: latch count %d is not positive", rlock.ErrInvalidArgument, n)
	}
	r, err := l.write(ctx, lua.LatchTrySet, func(id string) []any {
		return []any{n, id, l.window(), l.env.Publish(ctx)}
	})
	return r == 1, err
}

// CountDown decrements the count by one, as Redisson's countDown: at zero
// the key is deleted and "0" (count reached zero) is published on the
// latch's channel, which releases every waiter. A latch without a count
// is left alone (no error). Each call counts at most once: a copy re-sent
// by the Redis client after a lost reply, or by CountDown itself after a
// connection failure, is recognised by the call's ID, which the latch's
// operation log keeps for the client's replay window (see
// rlock.WithReplayWindow). It reports rlock.ErrWrongType when the key
// holds something else. If ctx ends while the call is in flight, it
// returns ctx's error and the count may or may not have been decremented
// (once at most). A count-down that no replica acknowledged (replica
// sync, see the package doc) returns an error wrapping rlock.ErrMayBeLost:
// it is applied on the master, once, and may be lost on failover; do not
// call CountDown again for it.
func (l *Latch) CountDown(ctx context.Context) error {
	_, err := l.write(ctx, lua.LatchCountDown, func(id string) []any {
		return []any{id, l.window(), l.env.Publish(ctx)}
	})
	return err
}

// Count returns the latch's count: 0 when it has none. It reports
// rlock.ErrWrongType when the key holds something other than a decimal
// integer. When ctx ends first it returns ctx's error at once (the read
// finishes in the background); rlock.ErrClosed once the client is closed
// (with a ctx that can end).
func (l *Latch) Count(ctx context.Context) (int64, error) {
	g, ok := l.env.Redis().(getter)
	if !ok {
		return 0, fmt.Errorf("%w: the Redis client %T has no GET", rlock.ErrInvalidArgument, l.env.Redis())
	}
	var v string
	var err error
	if rerr := l.env.Read(ctx, func() { v, err = g.Get(ctx, l.name).Result() }); rerr != nil {
		return 0, rerr
	}
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case isReply(err, "WRONGTYPE"):
		return 0, fmt.Errorf("%w: latch %q: %w", rlock.ErrWrongType, l.name, err)
	case err != nil:
		return 0, err
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		return 0, fmt.Errorf("%w: latch %q holds %q, not a count", rlock.ErrWrongType, l.name, v)
	}
	return n, nil
}

// getter is the GET of every go-redis client.
type getter interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}

// Delete deletes the latch and reports whether it had a count. It
// publishes "1" on the latch's channel as Redisson's delete does, which
// makes rlock's waiters look again: they find no count and return nil
// (Redisson's own waiters are not released by it, in Redisson or here).
// It reports rlock.ErrWrongType, deleting nothing, when the key holds
// something else. A re-sent copy is answered as the first was. If ctx
// ends while the call is in flight, it returns ctx's error and the latch
// may or may not be deleted. A delete that no replica acknowledged
// (replica sync, see the package doc) reports true with an error wrapping
// rlock.ErrMayBeLost: the latch is gone from the master, and may come back
// on failover.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	r, err := l.write(ctx, lua.LatchDelete, func(id string) []any {
		return []any{id, l.window(), l.env.Publish(ctx)}
	})
	return r == 1, err
}

// window is the operation log's replay window in ms.
func (l *Latch) window() int64 { return max(l.env.Replay().Milliseconds(), 1) }

// writeTries bounds how often write sends one operation when no reply
// comes back: each copy carries the same operation ID, so it runs once.
const writeTries = 3

// writePause is the first pause before write sends an operation again
// (doubling after each).
const writePause = 10 * time.Millisecond

// write runs script on the latch with a new operation ID and the
// arguments args builds around it, and returns its integer reply. A
// failure with no reply (a timeout, a broken connection) is retried with
// the same ID, so the operation happens at most once; a -1 reply is
// rlock.ErrWrongType. With replica sync on, a positive reply (the latch
// changed, or a re-sent copy of a change) that no replica acknowledged is
// returned with an error wrapping rlock.ErrMayBeLost.
func (l *Latch) write(ctx context.Context, script *redis.Script, args func(id string) []any) (int64, error) {
	id := l.env.RequestID()
	keys := []string{l.name, l.channel, l.ops}
	argv := args(id)
	var err error
	for try := 0; try < writeTries; try++ {
		if try > 0 {
			select {
			case <-time.After(writePause << (try - 1)):
			case <-ctx.Done():
				return 0, fmt.Errorf("latch %q: %w (last error: %w)", l.name, ctx.Err(), err)
			}
		}
		cmd, synced := l.env.RunSynced(ctx, script, keys, argv...)
		var r int64
		r, err = cmd.Int64()
		switch {
		case err == nil && r == -1:
			return 0, fmt.Errorf("%w: latch %q is not a string holding a count", rlock.ErrWrongType, l.name)
		case err == nil && r > 0 && synced.Unsynced():
			// A write that changed the latch (or a re-sent copy of one),
			// not known to be on any replica. It cannot be undone: a
			// count-down may have released waiters already.
			return r, fmt.Errorf("%w: latch %q: %s", rlock.ErrMayBeLost, l.name, synced.Describe("the write"))
		case err == nil:
			return r, nil
		case isReply(err, "WRONGTYPE"):
			return 0, fmt.Errorf("%w: latch %q: %w", rlock.ErrWrongType, l.name, err)
		case isReply(err) || ctx.Err() != nil:
			return 0, err
		}
	}
	return 0, err
}

// Await waits until the latch has no count (counted down to zero, never
// set, or deleted) and returns nil; at once if it has none. It listens on
// the latch's channel through the client's waiter hub (one subscription
// per client and latch, shared by its waiters, sharded or classic as the
// client's pub/sub mode says) and looks at the count on every message,
// once the subscription is confirmed (a count that reached zero before
// is seen then), and at least every poll (see WithPoll), so a lost
// message costs at most that. When ctx ends it returns ctx's error
// (with the last Redis error, if looks were failing); rlock.ErrClosed
// when the client closes; rlock.ErrWrongType when the key holds
// something else. Redis errors without a reply (a timeout, a broken
// connection) do not end the wait: the next look tries again.
func (l *Latch) Await(ctx context.Context) error {
	n, err := l.Count(ctx)
	if err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	w, ok := l.env.Hub().Join(l.channel)
	if !ok {
		return rlock.ErrClosed
	}
	defer w.Leave()
	lk, me := joinLooks(l.env.Hub(), l.channel)
	defer lk.leave()
	timer := time.NewTimer(l.poll)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-w.C:
		case <-timer.C:
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("latch %q: %w (last error: %w)", l.name, ctx.Err(), last)
			}
			return ctx.Err()
		case <-l.env.Closing():
			return rlock.ErrClosed
		}
		if lk.released(me) {
			return nil // another waiter of this client found no count since this one joined
		}
		joined := lk.joined()
		n, err := l.Count(ctx)
		switch {
		case err == nil && n <= 0:
			lk.foundZero(joined)
			w.WakeOthers() // a "0" woke one waiter of this client: the others return (see looks.go)
			return nil
		case err == nil:
			last = nil
		case errors.Is(err, rlock.ErrWrongType) || errors.Is(err, rlock.ErrClosed) || isReply(err):
			return err
		case ctx.Err() != nil:
			continue // reported by the select
		default:
			last = err
		}
		timer.Reset(l.poll)
	}
}

// isReply reports whether err is a Redis error reply, starting with one of
// prefixes if any are given.
func isReply(err error, prefixes ...string) bool {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) {
		return false
	}
	if len(prefixes) == 0 {
		return true
	}
	msg := reply.Error()
	for _, p := range prefixes {
		if len(msg) >= len(p) && msg[:len(p)] == p {
			return true
		}
	}
	return false
}
