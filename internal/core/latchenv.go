package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/waiters"
)

// LatchEnv is what package latch needs of a client's engine: its Redis
// client, waiter hub, publish argument, replay window and background
// reads. It exposes the engine's own mechanisms (one hub, one way to run
// scripts, one replay window) rather than growing a parallel path.
type LatchEnv struct{ c *Client }

// LatchEnvOf returns the latch environment of c.
func LatchEnvOf(c *Client) LatchEnv { return LatchEnv{c} }

// Redis returns the client's Redis client.
func (e LatchEnv) Redis() base.Redis { return e.c.rdb }

// Hub returns the client's waiter hub.
func (e LatchEnv) Hub() *waiters.Hub { return e.c.hub }

// Publish returns the scripts' publish argument (see publish.lua).
func (e LatchEnv) Publish(ctx context.Context) string { return e.c.publishArg(ctx) }

// Replay returns the client's replay window (see rlock.WithReplayWindow).
func (e LatchEnv) Replay() time.Duration { return e.c.replay }

// Closing is closed when the client starts closing.
func (e LatchEnv) Closing() <-chan struct{} { return e.c.closing }

// RequestID returns a new ID unique to this client's requests.
func (e LatchEnv) RequestID() string { return e.c.requestID() }

// Run runs a script as the lock scripts run (EVALSHA with EVAL fallback,
// re-run on a cluster after a connection error); the script must be safe
// to run twice.
func (e LatchEnv) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return e.c.run(ctx, s, keys, args...)
}

// RunSynced runs a write script with replica sync when the client has it
// on (see Client.RunSynced).
func (e LatchEnv) RunSynced(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, Synced) {
	return e.c.RunSynced(ctx, s, keys, args...)
}

// Read runs f, which must change nothing on the server, and returns at
// once with ctx's error when ctx ends first (f finishes in the
// background); base.ErrClosed once the client is closing.
func (e LatchEnv) Read(ctx context.Context, f func()) error { return e.c.await(ctx, f) }
