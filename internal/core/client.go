package core

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/renewal"
	"github.com/rlock-go/rlock/internal/replsync"
	"github.com/rlock-go/rlock/internal/waiters"
)

// Client is one process's connection to the locks on one Redis deployment:
// it carries the client ID that prefixes every owner field, the waiter hub
// (one pub/sub connection shared by every blocked Lock call) and the
// watchdog (one renewal scheduler for every held lock). Create one per
// Redis deployment and share it; it is safe for concurrent use.
type Client struct {
	rdb         base.Redis
	id          string
	tag         string // designation tag (waiters.Tag of id)
	hub         *waiters.Hub
	wd          *renewal.Scheduler
	sync        *replsync.Syncer                     // nil: no replica sync
	pipeliner   func() (*redis.AutoPipeliner, error) // rdb's auto-pipeliner; nil: no auto-pipelining
	inFlight    atomic.Int32                         // script calls in flight, counted with auto-pipelining only
	replay      time.Duration                        // lifetime of release latches
	maxPoll     time.Duration                        // longest wait between attempts on a lock without expiry
	unreachable time.Duration                        // see Config.Unreachable
	closing     chan struct{}
	life        context.Context // cancelled by Close: ends the background settles (see settleSoon)
	endLife     context.CancelFunc
	closed      atomic.Bool
	sendsOnce   bool          // go-redis sends a command once: a failure before the write proves it did not run
	handles     atomic.Uint64 // default owner IDs
	requests    atomic.Uint64 // request IDs
	reqPrefix   string        // the request IDs' prefix (see requestPrefix)

	log *slog.Logger
	ev  events // the hooks of Config.Hooks

	bgMu     sync.Mutex
	bgClosed bool           // no more background work: Close waits for bg
	bg       sync.WaitGroup // attempts finishing after their caller's ctx ended
	work     chan func()    // hands work to an idle background worker (see goBackground)

	mu     sync.Mutex
	owners map[ownerKey]*ownerState

	lostQ    atomic.Pointer[lostEntry] // owners to forget after a loss (see lost)
	draining atomic.Bool               // a goroutine is forgetting them
}

// Config is a validated client configuration (see reentrant's options).
type Config struct {
	ID      string        // client ID; empty: a random UUID
	Replay  time.Duration // latch lifetime; 0: derived from rdb's options
	MaxPoll time.Duration // longest wait on a lock without expiry; 0: 1 s
	// Unreachable is how long a waiting Lock rides through failures to
	// reach Redis (in a row) before it returns the last one wrapped in
	// ErrUnreachable; 0: DefaultUnreachable.
	Unreachable time.Duration
	Watchdog    []renewal.Option // the watchdog's options
	Logger      *slog.Logger     // where background failures are logged; nil: nowhere

	// ReplicaSync is the WAIT timeout of replica sync; 0: the default,
	// replsync.TimeoutFor the go-redis ReadTimeout (1 s, or half the
	// ReadTimeout when that is shorter), used when the go-redis client
	// supports replica sync.
	ReplicaSync time.Duration
	// NoReplicaSync turns replica sync off.
	NoReplicaSync bool
	// AutoPipeline sends scripts through rdb's go-redis auto-pipeliner.
	AutoPipeline bool
	// PubSub is how waiters listen and releases publish (see waiters.Mode).
	PubSub waiters.Mode
	// Hooks are called on the engine's events (see rlock.Trace).
	Hooks []Hooks
}

// DefaultUnreachable is how long a waiting Lock rides through failures to
// reach Redis before it gives up, unless configured otherwise: within the
// range of Redisson's retry budget with its defaults.
const DefaultUnreachable = 15 * time.Second

// NewClient returns a client that runs its locks through rdb. It does no
// I/O and starts no goroutine.
func NewClient(rdb base.Redis, cfg Config) (*Client, error) {
	if IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
	}
	cfg = cfg.withDefaults(rdb)
	wd, err := renewal.New(rdb, cfg.Watchdog...)
	if err != nil {
		return nil, err
	}
	pipeliner, err := newPipeliner(rdb, cfg.AutoPipeline)
	if err != nil {
		return nil, err
	}
	hub, err := waiters.New(rdb, cfg.PubSub)
	if err != nil {
		return nil, err
	}
	life, endLife := context.WithCancel(context.Background())
	c := &Client{
		life:        life,
		endLife:     endLife,
		sendsOnce:   sendsOnce(rdb),
		rdb:         rdb,
		pipeliner:   pipeliner,
		id:          cfg.ID,
		reqPrefix:   requestPrefix(cfg.ID),
		tag:         waiters.Tag(cfg.ID),
		hub:         hub,
		wd:          wd,
		replay:      cfg.Replay,
		maxPoll:     cfg.MaxPoll,
		unreachable: cfg.Unreachable,
		log:         cfg.Logger,
		ev:          newEvents(cfg.Hooks),
		closing:     make(chan struct{}),
		work:        make(chan func()),
		owners:      make(map[ownerKey]*ownerState),
	}
	if !cfg.NoReplicaSync {
		if c.sync, err = newSyncer(rdb, cfg, c.busy); err != nil {
			return nil, err
		}
	}
	hub.SetDesignation(c.tag, c.passOn)
	return c, nil
}

// passOn runs pass_on.lua for the reentrant lock of channel, in the
// background (see waiters.Hub.SetDesignation): unregisters this client
// when drop, and designates other clients in its place when pass. A
// failure is logged; a designation it loses leaves the lock's waiters to
// their own polls.
func (c *Client) passOn(channel string, drop, pass bool) {
	c.passOnFor(channel, c.tag, drop, pass)
}

// passOnFor is passOn for the client whose designation tag is tag: with
// another client's tag, drop and not pass, it takes that client off the
// lock's registry (see Lock.unregister). A registration it fails to take
// off lapses by itself.
func (c *Client) passOnFor(channel, tag string, drop, pass bool) {
	script, keys, msg := passOnCall(channel)
	if script == nil {
		return
	}
	run := func() {
		ctx := context.Background()
		err := c.run(ctx, script, keys, tag, boolArg(drop), boolArg(pass), designations,
			msg, c.publishArg(ctx)).Err()
		if err != nil {
			c.logger().Warn("rlock: passing a wake-up on or unregistering a client failed", "channel", channel, "tag", tag, "err", err)
		}
	}
	c.goBackground(run)
}

// unregisterTimeout bounds each call by which a closing client takes
// itself off a lock's registry (see unregisterAll), and unregisterWorkers
// how many run at once.
const (
	unregisterTimeout = time.Second
	unregisterWorkers = 8
)

// unregisterAll takes the closing client off the registries of the locks
// of channels, so that no release designates it any more, and passes on
// a designation it may have been given (when the lock is free): pass_on.lua
// for each, a few at a time, each given up after unregisterTimeout (a
// read already sent still takes the Redis client's ReadTimeout, unless
// ContextTimeoutEnabled). A registration left behind lapses by itself,
// and the other clients' waiters cover for a designee that does not act.
func (c *Client) unregisterAll(channels []string) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(len(channels), unregisterWorkers) {
		wg.Go(func() {
			for channel := range work {
				c.unregisterNow(channel)
			}
		})
	}
	for _, ch := range channels {
		work <- ch
	}
	close(work)
	wg.Wait()
}

// unregisterNow runs pass_on.lua for this client on the lock of channel:
// unregister, and pass on a designation if the lock is free.
func (c *Client) unregisterNow(channel string) {
	script, keys, msg := passOnCall(channel)
	if script == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	err := c.run(ctx, script, keys, c.tag, "1", "1", designations, msg, c.publishArg(ctx)).Err()
	if err != nil {
		c.logger().Warn("rlock: unregistering a closing client failed; its registration lapses", "channel", channel, "err", err)
	}
}

// passOnCall returns the script that passes a designation on, or
// unregisters a client, on the lock (or the two locks "x" and "{x}") of
// channel, with its KEYS and the message that follows a designation: a
// reentrant lock's pass_on.lua and "0", or a read-write lock's
// rw_pass_on.lua and "1"; nil for any other channel.
func passOnCall(channel string) (*redis.Script, []string, string) {
	if names := base.ChannelLocks(channel); len(names) > 0 {
		return lua.PassOn, append([]string{channel, base.Waiters(names[0])}, names...), base.UnlockMessage
	}
	if names := base.RWChannelLocks(channel); len(names) > 0 {
		return lua.RWPassOn, append([]string{channel, base.RWWaiters(names[0]), base.RWReaders(names[0])}, names...), base.ReadUnlockMessage
	}
	return nil, nil, ""
}

// isCluster reports whether rdb is a go-redis cluster client.
func isCluster(rdb base.Redis) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// withDefaults returns cfg with every unset field set to its default for
// a client on rdb.
func (cfg Config) withDefaults(rdb base.Redis) Config {
	if cfg.ID == "" {
		cfg.ID = uuid.NewString()
	}
	if cfg.Replay <= 0 {
		cfg.Replay = replayWindow(rdb)
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = time.Second
	}
	if cfg.Unreachable <= 0 {
		cfg.Unreachable = DefaultUnreachable
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// newPipeliner returns, with autoPipeline, the go-redis auto-pipeliner of
// rdb, created on first use (go-redis starts its goroutines then) and kept
// by rdb; nil without.
func newPipeliner(rdb base.Redis, autoPipeline bool) (func() (*redis.AutoPipeliner, error), error) {
	if !autoPipeline {
		return nil, nil
	}
	if _, ring := rdb.(*redis.Ring); ring {
		// A Ring has the methods, which report ErrRingAutoPipelineUnsupported.
		return nil, fmt.Errorf("%w: auto-pipelining needs a go-redis Client or ClusterClient; a Ring has no auto-pipeliner", base.ErrInvalidArgument)
	}
	if _, ok := rdb.(replsync.AutoPipelined); !ok {
		return nil, fmt.Errorf("%w: auto-pipelining needs a go-redis Client or ClusterClient, not %T", base.ErrInvalidArgument, rdb)
	}
	return sync.OnceValues(func() (*redis.AutoPipeliner, error) { return replsync.AutoPipeliner(rdb) }), nil
}

// busy reports whether another script call than the caller's is in flight
// on the client: only then does a script go through the auto-pipeliner,
// which hands each command to a goroutine of its own and back, a cost a
// lone call pays for nothing.
func (c *Client) busy() bool { return c.inFlight.Load() > 1 }

// scripter returns where a script call goes: rdb, or its auto-pipeliner
// when other calls are in flight (see busy).
func (c *Client) scripter() (redis.Scripter, error) {
	if c.pipeliner == nil || !c.busy() {
		return c.rdb, nil
	}
	return c.pipeliner()
}

// newSyncer returns the replica syncer of a client on rdb, or nil (replica
// sync off) for a go-redis client that cannot run it: a Ring, a wrapper,
// or a ReadTimeout under 2 ms, which leaves no room for WAIT (logged once,
// as a warning). Without an explicit timeout, WAIT gets
// replsync.TimeoutFor the ReadTimeout; an explicit one must be shorter than
// the ReadTimeout.
func newSyncer(rdb base.Redis, cfg Config, busy func() bool) (*replsync.Syncer, error) {
	rt := readTimeout(rdb)
	explicit := cfg.ReplicaSync > 0
	timeout := cfg.ReplicaSync
	switch {
	case explicit && rt > 0 && rt <= timeout:
		return nil, fmt.Errorf("%w: replica sync timeout %v is not shorter than the Redis client's ReadTimeout %v",
			base.ErrInvalidArgument, timeout, rt)
	case !explicit:
		timeout = replsync.TimeoutFor(rt)
	}
	opts := []replsync.Option{replsync.WithTimeout(max(timeout, time.Millisecond))}
	if cfg.AutoPipeline {
		opts = append(opts, replsync.WithAutoPipelineWhen(busy))
	}
	s, err := replsync.New(rdb, opts...)
	switch {
	case errors.Is(err, replsync.ErrUnsupportedClient) && !explicit:
		return nil, nil // a Ring, or a wrapper: no replica sync
	case err != nil:
		return nil, err
	case timeout == 0:
		cfg.Logger.Warn("rlock: replica sync is off: the Redis client's ReadTimeout is too short for WAIT (under 2ms); acquisitions are not checked against the replicas",
			"readTimeout", rt)
		return nil, nil
	}
	return s, nil
}

// IsNil reports whether v is nil or a typed nil pointer, map, etc.
func IsNil(v any) bool {
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

// readTimeout returns the go-redis client's read timeout, 0 if unknown.
func readTimeout(rdb base.Redis) time.Duration {
	switch c := rdb.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().ReadTimeout
	case *redis.ClusterClient:
		return c.Options().ReadTimeout
	}
	return 0
}

// replayWindow bounds how long after its first send a copy of one script
// call may still be sent: (sends - 1) × (dial + write + read + backoff),
// plus the client's own pauses between re-runs, between 1 s and 5 min
// (see replaySends).
func replayWindow(rdb base.Redis) time.Duration {
	sends, o, pauses, ok := replaySends(rdb)
	if !ok {
		return time.Minute
	}
	pos := func(d time.Duration) time.Duration {
		if d <= 0 { // no timeout configured: assume a generous one
			return 30 * time.Second
		}
		return d
	}
	each := pos(o.DialTimeout) + pos(o.WriteTimeout) + pos(o.ReadTimeout) + max(o.MaxRetryBackoff, 0)
	w := time.Duration(sends-1)*each + pauses
	return min(max(w, time.Second), 5*time.Minute)
}

// replaySends returns how many times one script call of this client may be
// sent (the first send included), the go-redis options that time each
// try, and the pauses of the client's own re-runs; false if rdb is not a
// go-redis client it knows. A Client sends 1 + MaxRetries times; a Ring
// makes 1 + MaxRetries tries on its shard clients, which do not retry. A
// ClusterClient makes MaxRedirects + 1 tries (go-redis counts a re-send
// after a timeout against MaxRedirects, as a redirect), each a call of a
// node client that itself sends 1 + MaxRetries times (the cluster's
// default MaxRetries is none); and run calls the ClusterClient again after
// a connection error, len(clusterRetries) more times.
func replaySends(rdb base.Redis) (int, redis.Options, time.Duration, bool) {
	switch c := rdb.(type) {
	case interface{ Options() *redis.Options }: // Client, failover Client
		o := c.Options()
		return 1 + max(o.MaxRetries, 0), *o, 0, true
	case *redis.ClusterClient:
		o := c.Options()
		var pauses time.Duration
		for _, p := range clusterRetries {
			pauses += p
		}
		sends := (max(o.MaxRedirects, 0) + 1) * (1 + max(o.MaxRetries, 0)) * (1 + len(clusterRetries))
		return sends, redis.Options{DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, MaxRetryBackoff: o.MaxRetryBackoff}, pauses, true
	case *redis.Ring:
		o := c.Options()
		return 1 + max(o.MaxRetries, 0), redis.Options{DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, MaxRetryBackoff: o.MaxRetryBackoff}, 0, true
	}
	return 0, redis.Options{}, 0, false
}

// ID returns the client ID, the first half of every owner field.
func (c *Client) ID() string { return c.id }

// Watchdog returns the client's renewal scheduler, for its settings and
// statistics.
func (c *Client) Watchdog() *renewal.Scheduler { return c.wd }

// publishArg returns the release scripts' publish argument: how this
// client's releases publish (see publish.lua). The first call of an auto
// mode client on a cluster probes the server once.
func (c *Client) publishArg(ctx context.Context) string { return c.hub.Publish(ctx) }

// Waiters returns a snapshot of the client's waiter hub.
func (c *Client) Waiters() waiters.Stats { return c.hub.Stats() }

// Close stops the watchdog and closes the pub/sub connection. It first
// waits for the background work (see goBackground and Runner): acquire
// attempts still finishing after their caller's context ended, and a
// combinator's member attempts and releases (each bounded by the Redis
// client's timeouts).
// Blocked Lock calls return ErrClosed; every lock still held by this client is reported
// lost (its Done channel closes, its Err wraps ErrLockLost and ErrClosed),
// since nothing renews it any more: it expires when its lease runs out.
// Close then takes the client off the waiter registries of the reentrant
// locks it was waiting for (see unregisterAll: one script call per lock, a
// few at a time, each given up after a second), and does not close the
// go-redis client. It is idempotent and returns nil.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.closing)
	c.endLife()
	c.bgMu.Lock()
	c.bgClosed = true
	c.bgMu.Unlock()
	c.bg.Wait() // bounded by the Redis client's timeouts
	c.wd.Close()
	c.hub.Close()
	c.unregisterAll(c.hub.Registered())
	c.mu.Lock()
	hps := make([]*holding, 0, len(c.owners))
	for _, o := range c.owners {
		if hp := o.holding.Load(); hp != nil {
			hps = append(hps, hp)
		}
	}
	c.mu.Unlock()
	for _, hp := range hps {
		hp.end(fmt.Errorf("%w: %w", base.ErrLockLost, base.ErrClosed))
	}
	return nil
}

// goBackground runs f in a goroutine that Close waits for, and reports
// false (running nothing) once Close has started waiting. The goroutine is
// an idle worker of the client's when there is one, or a new one, which
// then stays for the next call until it has been idle for workerIdle:
// handing f to a parked goroutine costs a fraction of starting one, and
// every acquire attempt under a ctx that can end takes this path.
func (c *Client) goBackground(f func()) bool {
	if !c.enterBackground() {
		return false
	}
	select {
	case c.work <- f: // an idle worker took it
	default:
		go c.worker(f)
	}
	return true
}

// await runs f, which must change nothing on the server, and returns once
// it has; or, when ctx ends first, returns ctx's error at once and leaves
// f to finish on a background worker (go-redis cannot abandon a read), so
// that the caller returns the moment ctx ends. f runs on the calling
// goroutine when ctx cannot end, or a combinator asks (see inline). It
// returns base.ErrClosed, running nothing, once the client is closing.
func (c *Client) await(ctx context.Context, f func()) error {
	if ctx.Done() == nil || inline(ctx) {
		f()
		return nil
	}
	done := make(chan struct{})
	if !c.goBackground(func() { defer close(done); f() }) {
		return base.ErrClosed
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enterBackground counts one more piece of background work that Close
// waits for (the caller calls c.bg.Done when it is over), and reports false
// (counting nothing) once Close has started waiting.
func (c *Client) enterBackground() bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgClosed {
		return false
	}
	c.bg.Add(1)
	return true
}

// workerIdle is how long a background worker waits for more work before
// it ends.
const workerIdle = 10 * time.Second

// worker runs f, then whatever work goBackground hands it, until it has
// been idle for workerIdle or the client closes.
func (c *Client) worker(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		c.bg.Done()
		idle.Reset(workerIdle)
		select {
		case f = <-c.work:
		case <-idle.C:
			return
		case <-c.closing:
			return
		}
	}
}

func (c *Client) logger() *slog.Logger { return c.log }

// ReplicaSync returns the replica-sync WAIT timeout, and false when replica
// sync is off.
func (c *Client) ReplicaSync() (time.Duration, bool) {
	if c.sync == nil {
		return 0, false
	}
	return c.sync.Timeout(), true
}

// clusterRetries are the pauses before running a script again after a
// connection error on a cluster, while go-redis reloads its slot map.
var clusterRetries = []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond}

// retryOnCluster reports whether err is a connection error on a cluster
// client, after which the slot's master may have failed over; it asks
// go-redis to reload its slot map.
func (c *Client) retryOnCluster(ctx context.Context, err error) bool {
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok || err == nil || isReply(err) || errors.Is(err, redis.Nil) {
		return false
	}
	cc.ReloadState(ctx)
	return true
}

// run runs a script. On a cluster, a connection error makes it reload the
// slot map and run the script again (a few times, briefly apart): every
// lock script is safe to run twice, and go-redis would otherwise keep
// sending to a failed master until its next periodic reload.
func (c *Client) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if c.pipeliner != nil { // count the call in flight (see busy)
		c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
	}
	sc, err := c.scripter()
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(notSent(err))
		return cmd
	}
	cmd := c.classify(s.Run(ctx, sc, keys, args...))
	var r clusterRetry
	for r.again(c, ctx, cmd.Err()) {
		cmd = c.classify(s.Run(ctx, sc, keys, args...))
	}
	return r.final(cmd)
}

// tryAgainPauses are the pauses before running a script again after a
// TRYAGAIN reply: its keys are split between two masters while their slot
// migrates, and the script did not run. Together about 3 s, for a
// migration to finish.
var tryAgainPauses = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond}

// clusterRetry counts the re-runs of one script call on a cluster, and
// remembers whether a run before the last may have run the script.
type clusterRetry struct {
	conn, tryAgain int
	mayHaveRun     bool
}

// final returns cmd, the last run's, with a failure that proves that run
// sent nothing made unknown again when an earlier run may have run the
// script.
func (r *clusterRetry) final(cmd *redis.Cmd) *redis.Cmd {
	if r.mayHaveRun {
		var ns *notSentError
		if errors.As(cmd.Err(), &ns) {
			cmd.SetErr(ns.err)
		}
	}
	return cmd
}

// again reports whether to run a script again after err, pausing first:
// after a connection error (see retryOnCluster), or a TRYAGAIN reply.
func (r *clusterRetry) again(c *Client, ctx context.Context, err error) bool {
	var pause time.Duration
	switch {
	case r.conn < len(clusterRetries) && c.retryOnCluster(ctx, err):
		pause = clusterRetries[r.conn]
		r.conn++
	case r.tryAgain < len(tryAgainPauses) && isTryAgain(err):
		pause = tryAgainPauses[r.tryAgain]
		r.tryAgain++
	default:
		return false
	}
	r.mayHaveRun = r.mayHaveRun || !wasNotSent(err)
	time.Sleep(pause)
	return true
}

// isTryAgain reports whether err is a TRYAGAIN reply.
func isTryAgain(err error) bool { return isReply(err, "TRYAGAIN") }

// isReply reports whether err is a Redis error reply, starting with one of
// prefixes if any are given.
func isReply(err error, prefixes ...string) bool {
	if err == nil {
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(reply.Error(), p) {
			return true
		}
	}
	return false
}

// runAcquire runs an acquire script, with replica sync when it is on. The
// error is set only when the script ran but WAIT failed: the write's
// replication is then unknown. Any other failure is in cmd.
func (c *Client) runAcquire(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, replsync.Result, error) {
	if c.sync == nil {
		return c.run(ctx, s, keys, args...), replsync.Result{}, nil
	}
	if c.pipeliner != nil { // count the call in flight (see busy)
		c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
	}
	attempt := func() (*redis.Cmd, replsync.Result, error) {
		cmd, res, err := c.sync.Run(ctx, s, keys, args...)
		if cmd == nil { // the syncer failed before sending the script
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(notSent(err))
			return cmd, res, nil
		}
		if cmd.Err() != nil {
			return c.classify(cmd), res, nil
		}
		return cmd, res, err
	}
	cmd, res, err := attempt()
	var r clusterRetry
	for r.again(c, ctx, cmd.Err()) {
		cmd, res, err = attempt()
	}
	return r.final(cmd), res, err
}

// notSentError is the failure of a script call that sent nothing: the
// script did not run, so the call's outcome is known (see unknownOutcome).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// notSent marks err as the failure of a script call that sent nothing.
func notSent(err error) error {
	if err == nil || wasNotSent(err) {
		return err
	}
	return &notSentError{err}
}

// wasNotSent reports whether err is the failure of a script call that
// sent nothing.
func wasNotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}

// classify marks cmd's failure as one that sent nothing when it proves
// it: go-redis failed to get a connection (a dial error, the pool's
// timeout, a closed client) and sends a command only once, so no earlier
// try can have been written. With retries, the failure of the last try
// says nothing of the tries before it, and the outcome stays unknown.
func (c *Client) classify(cmd *redis.Cmd) *redis.Cmd {
	if err := cmd.Err(); c.sendsOnce && beforeWrite(err) {
		cmd.SetErr(notSent(err))
	}
	return cmd
}

// beforeWrite reports whether err is a go-redis failure to get a
// connection, which comes before anything is written on one.
func beforeWrite(err error) bool {
	if err == nil || isReply(err) {
		return false
	}
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed)
}

// sendsOnce reports whether rdb is a go-redis client that sends a
// command at most once (MaxRetries off; see classify).
func sendsOnce(rdb base.Redis) bool {
	sends, _, _, ok := replaySends(rdb)
	_, plain := rdb.(interface{ Options() *redis.Options })
	return ok && plain && sends == 1
}

// requestID returns a new request ID, unique across clients: the client's
// request prefix (see requestPrefix) and a counter.
func (c *Client) requestID() string {
	return c.reqPrefix + ":" + strconv.FormatUint(c.requests.Add(1), 36)
}

// requestPrefix returns the prefix of the request IDs of a client called
// id, as unique across clients as the IDs themselves and shorter: a UUID
// (the default ID) is written as "~" and its 16 bytes in unpadded
// base64url, 23 characters instead of 36. Request IDs are recorded in the
// locks' replay latches, which every last release reads and writes back,
// and in the synchronizers' operation logs, so each character saved is
// saved on every release. Any other ID is kept, with a "~" in front when
// it starts with one: then no two IDs give one prefix (base64url has no
// "~", so a UUID's prefix never starts with "~~", and no other ID's
// prefix is a "~" and 22 base64url characters).
func requestPrefix(id string) string {
	if u, err := uuid.Parse(id); err == nil && u.String() == id {
		return "~" + base64.RawURLEncoding.EncodeToString(u[:])
	}
	if strings.HasPrefix(id, "~") {
		return "~" + id
	}
	return id
}

// detached returns ctx without its cancellation, for a script call whose
// outcome must be known even when the caller gives up (the call then
// settles in the background). A ctx that can never end is returned as it
// is, sparing an allocation on every uncontended call.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}
