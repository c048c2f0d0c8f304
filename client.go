package rlock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/renewal"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/watchdog"
)

func init() {
	core.Register(func(v any) (*core.Client, bool) {
		c, ok := v.(*Client)
		if !ok || c == nil || c.c == nil {
			return nil, false
		}
		return c.c, true
	})
}

// Client is one process's connection to the locks on one Redis deployment:
// it carries the client ID that prefixes every owner field, the waiter hub
// (one pub/sub connection shared by every blocked Lock call) and the
// watchdog (one renewal scheduler for every held lock). Create one per
// Redis deployment and share it; it is safe for concurrent use. Every lock
// kind uses it: package fair takes the same *Client.
type Client struct {
	c *core.Client
}

// ClientOption configures a Client. A nil ClientOption is ignored.
type ClientOption func(*clientConfig) error

// clientConfig is what the client options set.
type clientConfig = core.Config

// WithClientID sets the client ID, the first half of every owner field
// ("<clientID>:<ownerID>"). Default: a random UUID, as Redisson uses. Two
// live clients must never share an ID. It must be non-empty, at most 128
// bytes and contain no ':'.
func WithClientID(id string) ClientOption {
	return func(c *clientConfig) error {
		if id == "" || len(id) > 128 || strings.ContainsAny(id, ":\x00\r\n") {
			return fmt.Errorf("%w: client ID %q must be 1-128 bytes without ':' or control characters", ErrInvalidArgument, id)
		}
		c.ID = id
		return nil
	}
}

// WithWatchdogLease sets the watchdog lease: the lease a hold taken in
// watchdog mode gets, and that every renewal sets again (Redisson's
// lockWatchdogTimeout). Default watchdog.DefaultLease (30 s). It must be at
// least 3 ms. It also sets the default renewal interval, a third of it.
func WithWatchdogLease(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		c.Watchdog = append(c.Watchdog, renewal.WithLease(d))
		return nil
	}
}

// WithWatchdogInterval sets how often the watchdog renews every lock it
// holds in watchdog mode. Default: a third of the watchdog lease (10 s).
// It must be positive and less than the watchdog lease. It also bounds how
// long one node's renewal round is waited for before it counts as failed
// and is retried.
func WithWatchdogInterval(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		c.Watchdog = append(c.Watchdog, renewal.WithInterval(d))
		return nil
	}
}

// WithWatchdogBatchSize sets how many locks one renewal script call carries
// at most; a node's calls of one round go out in one pipeline. Default
// watchdog.DefaultBatchSize (100). It must be between 1 and 10000.
func WithWatchdogBatchSize(n int) ClientOption {
	return func(c *clientConfig) error {
		c.Watchdog = append(c.Watchdog, renewal.WithBatchSize(n))
		return nil
	}
}

// WithReplayWindow sets how long a release is remembered so that a copy of
// it re-sent by the Redis client (after a lost reply) is answered as the
// original was instead of as "not held". Each last release (and each force
// unlock) leaves one small key for this long. The default is derived from
// the go-redis client's options, as the longest a re-sent copy can follow
// the original: (sends - 1) × (MaxRetryBackoff + DialTimeout + WriteTimeout
// + ReadTimeout), between 1 s and 5 min, where sends is 1 + MaxRetries for
// a Client or a Ring, and for a ClusterClient (MaxRedirects + 1) × (1 +
// MaxRetries) × 4, since go-redis re-sends after a timeout within its
// redirect budget and the client runs a script up to three more times
// after a connection error on a cluster (plus those pauses, 600 ms). With
// go-redis v9.23 defaults that is 48 s for a Client and 4 min for a
// ClusterClient; 60 s when the options cannot be read. Only the reply
// depends on it: a copy arriving later still never changes lock state a
// second time, it is just answered ErrNotHeld. It must be positive.
func WithReplayWindow(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: replay window %v is not positive", ErrInvalidArgument, d)
		}
		c.Replay = d
		return nil
	}
}

// WithMaxPoll sets the longest a blocked Lock waits between two attempts on
// a lock that has no expiry (written by a foreign client without PEXPIRE),
// where no TTL bounds the wait. Default 1 s. It must be positive.
func WithMaxPoll(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: max poll %v is not positive", ErrInvalidArgument, d)
		}
		c.MaxPoll = d
		return nil
	}
}

// WithUnreachableTimeout sets how long a blocking Lock (and a waiting
// semaphore Acquire) rides through
// failures to reach Redis (timeouts, refused or broken connections, a
// failover's LOADING or READONLY replies), in a row, before it gives up
// and returns the last one wrapped in ErrUnreachable, even when its ctx has
// time left. Default: 15 s, about Redisson's retry budget with its
// defaults, long enough to ride through a Sentinel or Cluster failover. An
// answer from Redis starts the count again. TryLock is not affected: it
// returns the failure of its one attempt at once. d must be positive.
func WithUnreachableTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: unreachable timeout %v is not positive", ErrInvalidArgument, d)
		}
		c.Unreachable = d
		return nil
	}
}

// WithLogger sets where the client logs (default: nowhere): at Warn, every
// lost lock (with its cause, as Trace's LossInfo names it), renewal
// failures and failed fair-queue departures; at Debug, attempts a waiting
// Lock retries. Every line about a lock carries its name ("lock") and the
// owner's field ("owner"); a failed renewal round names the first of its
// locks and how many it carried ("locks").
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		c.Watchdog = append(c.Watchdog, renewal.WithLogger(l))
		c.Logger = l
		return nil
	}
}

// WithReplicaSync sets how long an acquisition waits for the master's
// replicas to acknowledge it (WAIT, pipelined with the acquire script on
// the same connection to the lock's master). Replica sync is on by
// default: when the master has connected replicas and none acknowledges
// in time, the acquisition is undone, TryLock returns
// ErrNotReplicated and Lock tries again within its context. The
// semaphores' acquisitions and drains are undone the same way, and a
// latch's writes, which cannot be undone, report ErrMayBeLost (see
// packages semaphore and latch). Partial
// acknowledgement passes; a master without replicas is not waited on. On a
// cluster, MOVED, ASK and TRYAGAIN replies (a slot migration) are followed
// as the ClusterClient follows them. It needs a *redis.Client (plain or
// failover) or a *redis.ClusterClient; other clients (a Ring, a wrapper)
// get no replica sync unless d is given, when NewClient reports the error.
// The WAIT reply is read within the go-redis ReadTimeout, so d must be
// shorter than it (else NewClient reports ErrInvalidArgument); the default
// is 1 s, or half the ReadTimeout when that is shorter (100 ms for a 200
// ms ReadTimeout). Only a ReadTimeout under 2 ms leaves no room for WAIT:
// replica sync is then off by default, and NewClient logs a warning (see
// WithLogger). d must be at least 1 ms.
func WithReplicaSync(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: replica sync timeout %v is less than 1ms", ErrInvalidArgument, d)
		}
		c.ReplicaSync, c.NoReplicaSync = d, false
		return nil
	}
}

// WithoutReplicaSync turns replica sync off: an acquisition is reported as
// soon as the master has it, and a failover before it reached a replica
// can lose the lock (two owners may then hold it). It saves the wait for
// the replicas' acknowledgement on every acquisition.
func WithoutReplicaSync() ClientOption {
	return func(c *clientConfig) error {
		c.NoReplicaSync = true
		return nil
	}
}

// WithAutoPipeline sends the lock, unlock and queue scripts through the
// deferred go-redis auto-pipeliner of rdb (Client.AsyncAutoPipeline or
// ClusterClient's; EXPERIMENTAL in go-redis) while other script
// calls of the client are in flight, so that the Lock and Unlock calls of
// many goroutines share round trips instead of taking one connection each.
// With 64 goroutines on distinct keys it more than doubles throughput (see
// docs/benchmarks.md); a lone goroutine sees no change. Off by
// default.
//
// An auto-pipelined attempt of a Lock or TryLock whose ctx can end waits
// for its reply on the caller's goroutine, and still returns the moment
// ctx ends (the attempt is then concluded in the background, a grant given
// back), except on a cluster and on a master with replicas to wait for,
// where it runs on the client's background worker as without
// auto-pipelining.
//
// The auto-pipeliner belongs to rdb: it starts on the first script call,
// is shared with anything else in the process that uses rdb's, and stops
// when rdb is closed (closing the rlock client does not stop it). A reply
// lost inside a pipeline is retried like any other command, which rlock's
// scripts tolerate. Acquisitions that wait for replicas (WithReplicaSync,
// on a master with replicas) still go in their own pipeline with WAIT.
// NewClient reports ErrInvalidArgument when rdb is not a go-redis Client
// or ClusterClient (a Ring has no auto-pipeliner).
func WithAutoPipeline() ClientOption {
	return func(c *clientConfig) error {
		c.AutoPipeline = true
		return nil
	}
}

// PubSubMode is how a client's blocked Lock calls listen for releases and
// how its releases (Unlock, ForceUnlock, fair-queue wake-ups) publish, on
// Redis Cluster. Redis keeps classic pub/sub (PUBLISH, SUBSCRIBE) and
// sharded pub/sub (SPUBLISH, SSUBSCRIBE; Redis 7+) apart: a waiter hears
// only releases published the way it listens. Classic pub/sub broadcasts
// every message to every node of a cluster; sharded pub/sub keeps it in
// the lock's shard (its master and replicas), which is how a lock service
// scales with the cluster. Redisson (cluster, Redis 7+, its default
// shardedSubscriptionMode AUTO) uses sharded pub/sub.
type PubSubMode int

const (
	// PubSubAuto is the default. On a Redis Cluster whose servers support
	// sharded pub/sub (probed once with PUBSUB SHARDNUMSUB, as Redisson
	// probes), waiters listen both ways (SSUBSCRIBE at the lock's master,
	// and SUBSCRIBE) and releases publish both ways, so rlock shares
	// locks with every Redisson setting and every older rlock client.
	// The price: each release is still broadcast to every node, and a
	// waiter may be woken twice by an rlock release (one extra attempt).
	// Elsewhere (a single server, Sentinel, a Ring, miniredis, Redis < 7)
	// it is PubSubClassic.
	PubSubAuto PubSubMode = iota
	// PubSubSharded listens with SSUBSCRIBE only, one connection per
	// master that has waiters, and publishes with SPUBLISH only: no
	// message leaves the lock's shard. Every client of the lock must then
	// listen sharded (rlock in PubSubAuto or PubSubSharded, Redisson with
	// shardedSubscriptionMode AUTO or ON); classic listeners are woken
	// only by their lease-bound polls. Needs a *redis.ClusterClient (else
	// NewClient reports ErrInvalidArgument) and Redis 7+ (else releases
	// fail). A release that runs on a slot's new master during a slot
	// migration may reach waiters still subscribed at the old one only
	// when the migration ends and they resubscribe.
	PubSubSharded
	// PubSubClassic listens with SUBSCRIBE and publishes with PUBLISH only,
	// as rlock did before sharded pub/sub: for Redisson with
	// shardedSubscriptionMode OFF, and for servers without sharded pub/sub.
	PubSubClassic
)

// WithPubSubMode sets how the client's waiters listen and its releases
// publish on Redis Cluster (see PubSubMode). Default PubSubAuto.
// Subscriptions are shared and reference-counted per channel in every
// mode, and followed across reconnects, failovers and slot moves; a
// wake-up lost anyway costs a waiter at most the lock's remaining lease
// (pub/sub is only a hint). NewClient reports ErrInvalidArgument for an
// unknown mode, and for PubSubSharded on anything but a ClusterClient.
func WithPubSubMode(mode PubSubMode) ClientOption {
	return func(c *clientConfig) error {
		switch mode {
		case PubSubAuto:
			c.PubSub = waiters.Auto
		case PubSubSharded:
			c.PubSub = waiters.Sharded
		case PubSubClassic:
			c.PubSub = waiters.Classic
		default:
			return fmt.Errorf("%w: unknown pub/sub mode %d", ErrInvalidArgument, int(mode))
		}
		return nil
	}
}

// String returns "auto", "sharded" or "classic".
func (m PubSubMode) String() string {
	switch m {
	case PubSubAuto:
		return "auto"
	case PubSubSharded:
		return "sharded"
	case PubSubClassic:
		return "classic"
	}
	return fmt.Sprintf("PubSubMode(%d)", int(m))
}

// NewClient returns a client that runs its locks through rdb: a
// *redis.Client, *redis.ClusterClient, failover client, *redis.Ring, or
// anything else with the methods of Redis. It does no I/O and starts
// no goroutine. It reports ErrInvalidArgument for a nil rdb or a bad option.
// Close the client when done; closing it does not close rdb.
func NewClient(rdb Redis, opts ...ClientOption) (*Client, error) {
	var cfg core.Config
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	c, err := core.NewClient(rdb, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// ID returns the client ID, the first half of every owner field.
func (c *Client) ID() string { return c.c.ID() }

// WatchdogStats returns a snapshot of the watchdog's counters.
func (c *Client) WatchdogStats() watchdog.Stats { return c.c.Watchdog().Stats() }

// WaiterStats describes the client's waiter hub.
type WaiterStats struct {
	Connections int // open pub/sub connections: 1 once anything waited (per channel on a Ring), plus one per master with sharded subscriptions
	Channels    int // channels subscribed: one per lock (reentrant), one per waiting owner (fair)
	Waiters     int // Lock calls waiting now
}

// Waiters returns a snapshot of the client's waiter hub.
func (c *Client) Waiters() WaiterStats {
	s := c.c.Waiters()
	return WaiterStats{Connections: s.Connections, Channels: s.Channels, Waiters: s.Waiters}
}

// ReplicaSync returns the replica-sync timeout, and false when replica sync
// is off (WithoutReplicaSync, or a client or read timeout that does not
// allow it).
func (c *Client) ReplicaSync() (time.Duration, bool) { return c.c.ReplicaSync() }

// Close stops the watchdog and closes the pub/sub connection. It first
// waits for acquire attempts still finishing in the background after their
// caller's context ended, and for the attempts and releases a MultiLock or
// RedLock runs in parallel on this client's locks (each bounded by the
// Redis client's timeouts). Blocked Lock calls return ErrClosed; every lock still held by this
// client is reported lost (its Done channel closes, its Err wraps
// ErrLockLost and ErrClosed), since nothing renews it any more: it expires
// when its lease runs out, unless its owner still calls Unlock, which
// works after Close (as do ForceUnlock and the queries) as long as the
// go-redis client is open: close the rlock client first, then the go-redis
// client. Lock, TryLock and SetLease return ErrClosed. Close takes the
// client off the waiter registries of the reentrant locks it was waiting
// for (one script call per lock, each given up after a second), so that no
// release asks it to wake a waiter; it does not close the go-redis client
// (fair-lock waiters leaving their queue may still use it briefly). It is idempotent and returns nil.
func (c *Client) Close() error { return c.c.Close() }
