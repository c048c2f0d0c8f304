package reentrant

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
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
type ClientOption func(*core.Config) error

// WithClientID sets the client ID, the first half of every owner field
// ("<clientID>:<ownerID>"). Default: a random UUID, as Redisson uses. Two
// live clients must never share an ID. It must be non-empty, at most 128
// bytes and contain no ':'.
func WithClientID(id string) ClientOption {
	return func(c *core.Config) error {
		if id == "" || len(id) > 128 || strings.ContainsAny(id, ":\x00\r\n") {
			return fmt.Errorf("%w: client ID %q must be 1-128 bytes without ':' or control characters", rlock.ErrInvalidArgument, id)
		}
		c.ID = id
		return nil
	}
}

// WithWatchdog configures the client's watchdog (see package watchdog for
// the options and their defaults: a 30 s lease renewed every 10 s, 100 locks
// per round trip).
func WithWatchdog(opts ...watchdog.Option) ClientOption {
	return func(c *core.Config) error {
		c.Watchdog = append(c.Watchdog, opts...)
		return nil
	}
}

// WithReplayWindow sets how long a release is remembered so that a copy of
// it re-sent by the Redis client (after a lost reply) is answered as the
// original was instead of as "not held". Each last release (and each force
// unlock) leaves one small key for this long. The default is derived from
// the go-redis client's options, as the longest a re-sent copy can follow
// the original: MaxRetries × (MaxRetryBackoff + DialTimeout + WriteTimeout
// + ReadTimeout), between 1 s and 5 min (34.5 s for go-redis defaults); 60
// s when the options cannot be read. Only the reply depends on it: a copy
// arriving later still never changes lock state a second time, it is just
// answered ErrNotHeld. It must be positive.
func WithReplayWindow(d time.Duration) ClientOption {
	return func(c *core.Config) error {
		if d <= 0 {
			return fmt.Errorf("%w: replay window %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.Replay = d
		return nil
	}
}

// WithMaxPoll sets the longest a blocked Lock waits between two attempts on
// a lock that has no expiry (written by a foreign client without PEXPIRE),
// where no TTL bounds the wait. Default 1 s. It must be positive.
func WithMaxPoll(d time.Duration) ClientOption {
	return func(c *core.Config) error {
		if d <= 0 {
			return fmt.Errorf("%w: max poll %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.MaxPoll = d
		return nil
	}
}

// WithLogger sets where the client logs failures of background work:
// renewals, and fair-queue departures (default: nowhere).
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *core.Config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", rlock.ErrInvalidArgument)
		}
		c.Watchdog = append(c.Watchdog, watchdog.WithLogger(l))
		c.Logger = l
		return nil
	}
}

// NewClient returns a client that runs its locks through rdb: a
// *redis.Client, *redis.ClusterClient, failover client, *redis.Ring, or
// anything else with the methods of rlock.Redis. It does no I/O and starts
// no goroutine. It reports ErrInvalidArgument for a nil rdb or a bad option.
// Close the client when done; closing it does not close rdb.
func NewClient(rdb rlock.Redis, opts ...ClientOption) (*Client, error) {
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

// Watchdog returns the client's renewal scheduler, for its settings and
// statistics.
func (c *Client) Watchdog() *watchdog.Scheduler { return c.c.Watchdog() }

// WaiterStats describes the client's waiter hub.
type WaiterStats struct {
	Connections int // open pub/sub connections: 1 once anything waited (per channel on a Ring)
	Channels    int // channels subscribed: one per lock (reentrant), one per waiting owner (fair)
	Waiters     int // Lock calls waiting now
}

// Waiters returns a snapshot of the client's waiter hub.
func (c *Client) Waiters() WaiterStats {
	s := c.c.Waiters()
	return WaiterStats{Connections: s.Connections, Channels: s.Channels, Waiters: s.Waiters}
}

// Close stops the watchdog and closes the pub/sub connection. It first
// waits for acquire attempts still finishing in the background after their
// caller's context ended (each bounded by the Redis client's timeouts).
// Blocked Lock calls return ErrClosed; every lock still held by this
// client is reported lost (its Done channel closes, its Err wraps
// ErrLockLost and ErrClosed), since nothing renews it any more: it expires
// when its lease runs out. Close sends nothing itself and does not close
// the go-redis client (fair-lock waiters leaving their queue may still use
// it briefly). It is idempotent and returns nil.
func (c *Client) Close() error { return c.c.Close() }
