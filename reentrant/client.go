package reentrant

import (
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/watchdog"
)

// Client is one process's connection to the locks on one Redis deployment:
// it carries the client ID that prefixes every owner field, the waiter hub
// (one pub/sub connection shared by every blocked Lock call) and the
// watchdog (one renewal scheduler for every held lock). Create one per
// Redis deployment and share it; it is safe for concurrent use.
type Client struct {
	rdb      rlock.Redis
	id       string
	hub      *waiters.Hub
	wd       *watchdog.Scheduler
	replay   time.Duration // lifetime of release latches
	maxPoll  time.Duration // longest wait between attempts on a lock without expiry
	closing  chan struct{}
	closed   atomic.Bool
	handles  atomic.Uint64 // default owner IDs
	requests atomic.Uint64 // request IDs

	bg sync.WaitGroup // attempts finishing after their caller's ctx ended

	mu    sync.Mutex
	holds map[holdKey]*hold
}

// ClientOption configures a Client. A nil ClientOption is ignored.
type ClientOption func(*clientConfig) error

type clientConfig struct {
	id       string
	replay   time.Duration
	watchdog []watchdog.Option
	maxPoll  time.Duration
}

// WithClientID sets the client ID, the first half of every owner field
// ("<clientID>:<ownerID>"). Default: a random UUID, as Redisson uses. Two
// live clients must never share an ID. It must be non-empty, at most 128
// bytes and contain no ':'.
func WithClientID(id string) ClientOption {
	return func(c *clientConfig) error {
		if id == "" || len(id) > 128 || strings.ContainsAny(id, ":\x00\r\n") {
			return fmt.Errorf("%w: client ID %q must be 1-128 bytes without ':' or control characters", rlock.ErrInvalidArgument, id)
		}
		c.id = id
		return nil
	}
}

// WithWatchdog configures the client's watchdog (see package watchdog for
// the options and their defaults: a 30 s lease renewed every 10 s, 100 locks
// per round trip).
func WithWatchdog(opts ...watchdog.Option) ClientOption {
	return func(c *clientConfig) error {
		c.watchdog = append(c.watchdog, opts...)
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
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: replay window %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.replay = d
		return nil
	}
}

// WithMaxPoll sets the longest a blocked Lock waits between two attempts on
// a lock that has no expiry (written by a foreign client without PEXPIRE),
// where no TTL bounds the wait. Default 1 s. It must be positive.
func WithMaxPoll(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: max poll %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.maxPoll = d
		return nil
	}
}

// WithLogger sets where the client logs renewal failures (default: nowhere).
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", rlock.ErrInvalidArgument)
		}
		c.watchdog = append(c.watchdog, watchdog.WithLogger(l))
		return nil
	}
}

// NewClient returns a client that runs its locks through rdb: a
// *redis.Client, *redis.ClusterClient, failover client, *redis.Ring, or
// anything else with the methods of rlock.Redis. It does no I/O and starts
// no goroutine. It reports ErrInvalidArgument for a nil rdb or a bad option.
// Close the client when done; closing it does not close rdb.
func NewClient(rdb rlock.Redis, opts ...ClientOption) (*Client, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", rlock.ErrInvalidArgument)
	}
	cfg := clientConfig{maxPoll: time.Second}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.id == "" {
		cfg.id = uuid.NewString()
	}
	if cfg.replay == 0 {
		cfg.replay = replayWindow(rdb)
	}
	wd, err := watchdog.New(rdb, cfg.watchdog...)
	if err != nil {
		return nil, err
	}
	return &Client{
		rdb:     rdb,
		id:      cfg.id,
		hub:     waiters.New(rdb),
		wd:      wd,
		replay:  cfg.replay,
		maxPoll: cfg.maxPoll,
		closing: make(chan struct{}),
		holds:   make(map[holdKey]*hold),
	}, nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// replayWindow bounds how long go-redis may go on re-sending one command.
func replayWindow(rdb rlock.Redis) time.Duration {
	var retries int
	var dial, read, write, backoff time.Duration
	switch c := rdb.(type) {
	case interface{ Options() *redis.Options }: // Client, failover Client
		o := c.Options()
		retries, dial, read, write, backoff = o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		retries, dial, read, write, backoff = o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.Ring:
		o := c.Options()
		retries, dial, read, write, backoff = o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	default:
		return time.Minute
	}
	pos := func(d time.Duration) time.Duration {
		if d <= 0 { // no timeout configured: assume a generous one
			return 30 * time.Second
		}
		return d
	}
	w := time.Duration(max(retries, 0)) * (pos(dial) + pos(read) + pos(write) + max(backoff, 0))
	return min(max(w, time.Second), 5*time.Minute)
}

// ID returns the client ID, the first half of every owner field.
func (c *Client) ID() string { return c.id }

// Watchdog returns the client's renewal scheduler, for its settings and
// statistics.
func (c *Client) Watchdog() *watchdog.Scheduler { return c.wd }

// WaiterStats describes the client's waiter hub.
type WaiterStats struct {
	Connections int // open pub/sub connections: 1 once anything waited (per channel on a Ring)
	Channels    int // lock channels subscribed
	Waiters     int // Lock calls waiting now
}

// Waiters returns a snapshot of the client's waiter hub.
func (c *Client) Waiters() WaiterStats {
	s := c.hub.Stats()
	return WaiterStats{Connections: s.Connections, Channels: s.Channels, Waiters: s.Waiters}
}

// Close stops the watchdog and closes the pub/sub connection. It first
// waits for acquire attempts still finishing in the background after their
// caller's context ended (each bounded by the Redis client's timeouts).
// Blocked Lock calls return ErrClosed; every lock still held by this client is reported
// lost (its Done channel closes, its Err wraps ErrLockLost and ErrClosed),
// since nothing renews it any more: it expires when its lease runs out.
// Close sends nothing itself and does not close the go-redis client. It is
// idempotent and returns nil.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.closing)
	c.bg.Wait() // bounded by the Redis client's timeouts
	c.wd.Close()
	c.hub.Close()
	c.mu.Lock()
	eps := make([]*epoch, 0, len(c.holds))
	for _, h := range c.holds {
		if ep := h.ep.Load(); ep != nil {
			eps = append(eps, ep)
		}
	}
	c.mu.Unlock()
	for _, ep := range eps {
		ep.end(fmt.Errorf("%w: %w", rlock.ErrLockLost, rlock.ErrClosed))
	}
	return nil
}

func (c *Client) requestID() string {
	return c.id + ":" + strconv.FormatUint(c.requests.Add(1), 36)
}
