package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/waiters"
)

// What the synchronizers outside the lock engine (package semaphore) use
// of the client: its script runner, waiter hub, publish mode, replay
// window, poll bound and closing signal.

// Run runs a script as the locks' scripts run (EVALSHA with EVAL
// fallback; on a cluster, again after a connection error or TRYAGAIN).
// Every script run this way must be safe to run twice.
func (c *Client) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return c.run(ctx, s, keys, args...)
}

// Hub returns the client's waiter hub.
func (c *Client) Hub() *waiters.Hub { return c.hub }

// PublishArg returns the publish argument of the scripts that wake
// waiters (see publish.lua).
func (c *Client) PublishArg(ctx context.Context) string { return c.publishArg(ctx) }

// ReplayWindow returns how long a re-sent copy of a script call can
// follow the original (see rlock.WithReplayWindow).
func (c *Client) ReplayWindow() int64 { return c.replay.Milliseconds() }

// RequestID returns an ID unique among every client's calls: the client
// ID and a counter.
func (c *Client) RequestID() string { return c.requestID() }

// Closing is closed when the client closes.
func (c *Client) Closing() <-chan struct{} { return c.closing }

// Closed reports whether the client is closed.
func (c *Client) Closed() bool { return c.closed.Load() }

// Logger returns where the client logs (never nil).
func (c *Client) Logger() *slog.Logger { return c.logger() }

// Life returns a context cancelled when the client closes.
func (c *Client) Life() context.Context { return c.life }

// CountingDesignation returns this client's designation on a semaphore's
// channel (see waiters.CountingDesignation).
func (c *Client) CountingDesignation() string { return waiters.CountingDesignation(c.tag) }

// Background runs f in a goroutine that Close waits for, and reports false
// (running nothing) once the client is closing.
func (c *Client) Background(f func()) bool { return c.goBackground(f) }

// Synced is what RunSynced learned of a write's replication.
type Synced struct {
	// Replicas is the number of replicas connected to the master.
	Replicas int
	// Acked is how many of them acknowledged the write within Timeout.
	Acked int
	// Timeout is the replica-sync WAIT timeout.
	Timeout time.Duration
	// Err is set when the script ran but WAIT failed (a connection lost
	// after the script's reply, say): the write's replication is unknown.
	Err error
}

// Unsynced reports the case in which replica sync undoes a lock's
// acquisition (Redisson's rule): the master has at least one connected
// replica and none acknowledged the write within the timeout, or WAIT
// failed after the script ran. The write stands on the master and may be
// lost on failover.
func (s Synced) Unsynced() bool { return s.Err != nil || (s.Replicas > 0 && s.Acked == 0) }

// Describe says, for an error message, why a write of what is not known to
// be replicated.
func (s Synced) Describe(what string) string {
	if s.Err != nil {
		return fmt.Sprintf("%s: waiting for replicas failed: %v", what, s.Err)
	}
	return fmt.Sprintf("none of %d replicas acknowledged %s within %v", s.Replicas, what, s.Timeout)
}

// RunSynced runs a write script as the locks' acquire scripts run: with
// replica sync on, the script and WAIT go in one pipeline on the master
// of keys[0], and the result says how many replicas acknowledged the
// write; with it off, it is Run and the result is empty (never
// Unsynced). The script's reply or failure is in the returned Cmd, read as
// with Run; the Synced result is meaningful only when the Cmd has no
// error. Every script run this way must be safe to run twice.
func (c *Client) RunSynced(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, Synced) {
	cmd, res, err := c.runAcquire(ctx, s, keys, args...)
	if c.sync == nil {
		return cmd, Synced{}
	}
	return cmd, Synced{Replicas: res.Replicas, Acked: res.Acked, Timeout: c.sync.Timeout(), Err: err}
}

// NotReplicatedPause is how long a waiting acquisition pauses after one
// undone for lack of replica acknowledgement (as a waiting Lock does).
const NotReplicatedPause = notReplicatedPause

// Outlive is the state of a waiting synchronizer call (a semaphore's
// Acquire) that outlives failed attempts as a waiting Lock does: its
// zero value is ready.
type Outlive struct {
	fails int
	since time.Time
}

// Outlive turns the failure err of a waiting call's attempt on what is
// named into the pause before its next attempt, as a waiting Lock does:
// an acquisition undone for lack of replica acknowledgement pauses
// NotReplicatedPause; a transient Redis error (no reply, a broken
// connection, a failover under way) pauses 10 ms, doubling to 1 s, until
// Redis has not answered for the client's Unreachable duration, when an
// error wrapping rlock.ErrUnreachable and err is returned. Any other error
// is returned as it is. It returns 0 and nil for err nil.
func (c *Client) Outlive(o *Outlive, what string, err error) (time.Duration, error) {
	switch {
	case err == nil:
		o.fails, o.since = 0, time.Time{}
		return 0, nil
	case errors.Is(err, base.ErrNotReplicated):
		c.logger().Warn("rlock: acquire undone, no replica acknowledged it; trying again", "name", what, "err", err)
		return notReplicatedPause, nil
	case transient(err):
		pause, gone := o.transient(c, what, err)
		if gone != nil {
			return 0, gone
		}
		c.logger().Debug("rlock: attempt failed; trying again", "name", what, "err", err, "pause", pause)
		return pause, nil
	}
	return 0, err
}

// transient counts the transient failure err of an attempt on what and
// returns the pause before the next one: 10 ms, doubling to 1 s; or,
// once Redis has not answered for c's unreachable timeout, an error
// wrapping rlock.ErrUnreachable and err. A waiting Lock and a waiting
// synchronizer call share it.
func (o *Outlive) transient(c *Client, what string, err error) (time.Duration, error) {
	now := time.Now()
	if o.fails == 0 {
		o.since = now
	}
	if d := now.Sub(o.since); d >= c.unreachable {
		return 0, fmt.Errorf("%w: %q: no answer from Redis for %v: %w", base.ErrUnreachable, what, d.Round(time.Millisecond), err)
	}
	pause := min(transientPause<<min(o.fails, 10), transientPauseMax)
	o.fails++
	return pause, nil
}
