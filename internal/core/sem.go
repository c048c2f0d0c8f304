package core

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

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
