// Package replsync runs a lock script and then WAIT on the same connection
// to the master that holds the script's keys, so the caller learns how
// many replicas have the write before it reports the lock as acquired:
// the building block of replica sync (Redisson's checkLockSyncedSlaves).
//
// Why one connection: WAIT blocks until the replicas have acknowledged
// every write sent before it on the same connection. Sent on another
// connection, or routed by a ClusterClient to another node, it would wait
// for nothing (or for unrelated writes). So the script and WAIT go out as
// one pipeline (not MULTI) on the master of the first key: through
// ClusterClient.MasterForKey on a cluster, through the client's own pipeline
// on a *redis.Client (failover clients included, they are *redis.Client).
//
// The rule the caller applies (Redisson's): if the master has at least one
// connected replica and none acknowledged within the timeout, the write may
// be lost on failover: roll it back and report an error. Partial
// acknowledgement passes. A master without replicas is not waited on.
package replsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// Defaults.
const (
	// DefaultTimeout is how long WAIT waits for the replicas (Redisson's
	// slavesSyncTimeout).
	DefaultTimeout = time.Second
	// DefaultRefresh is how long a master's replica count is reused before
	// INFO is asked again.
	DefaultRefresh = 5 * time.Second
)

// TimeoutFor returns the default WAIT timeout for a Redis client whose
// ReadTimeout is readTimeout: DefaultTimeout, or half of readTimeout when
// that is shorter, since the replies of the script and of WAIT are read
// within one ReadTimeout and the other half is left for the script and the
// round trip. A readTimeout of 0 or less (none) gives DefaultTimeout. It
// returns 0 when readTimeout is under 2 ms: no WAIT timeout fits (WAIT's
// shortest is 1 ms; WAIT 0 would wait for ever).
func TimeoutFor(readTimeout time.Duration) time.Duration {
	if readTimeout <= 0 {
		return DefaultTimeout
	}
	d := min(DefaultTimeout, readTimeout/2).Truncate(time.Millisecond)
	if d < time.Millisecond {
		return 0
	}
	return d
}

// ErrUnsupportedClient is returned by New for a client that cannot run a
// script and WAIT on one connection to a key's master (a *redis.Ring, or a
// wrapper that hides the client type).
var ErrUnsupportedClient = errors.New("rlock: replica sync needs a *redis.Client or a *redis.ClusterClient")

// Option configures a Syncer. A nil Option is ignored.
type Option func(*Syncer) error

// WithTimeout sets how long WAIT waits for the replicas to acknowledge
// (default DefaultTimeout). It must be at least 1 ms, and shorter than the
// Redis client's ReadTimeout (checked by Run), since the WAIT reply is read
// with that timeout.
func WithTimeout(d time.Duration) Option {
	return func(s *Syncer) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: replica sync timeout %v is less than 1ms", base.ErrInvalidArgument, d)
		}
		s.timeout = d
		return nil
	}
}

// WithRefresh sets how long a master's replica count (INFO replication,
// connected_slaves) is reused (default DefaultRefresh). The count is also
// asked again at once whenever fewer replicas acknowledged than expected.
// It must be positive.
func WithRefresh(d time.Duration) Option {
	return func(s *Syncer) error {
		if d <= 0 {
			return fmt.Errorf("%w: replica count refresh %v is not positive", base.ErrInvalidArgument, d)
		}
		s.refresh = d
		return nil
	}
}

// WithAutoPipeline sends a script with nothing to wait for (its master has
// no replica) through the master's go-redis auto-pipeliner
// (redis.Client.AutoPipeline), so that concurrent calls share round trips.
// A script followed by WAIT always goes in its own pipeline, since both
// must use one connection.
func WithAutoPipeline() Option {
	return func(s *Syncer) error {
		s.autoPipeline = true
		return nil
	}
}

// WithAutoPipelineWhen is WithAutoPipeline for the calls made while busy
// reports true (other calls in flight, say); the others go straight to the
// master, since the auto-pipeliner's hand-off to its own goroutine and back
// only pays off when there is something to batch.
func WithAutoPipelineWhen(busy func() bool) Option {
	return func(s *Syncer) error {
		s.autoPipeline, s.busy = true, busy
		return nil
	}
}

// Syncer runs scripts followed by WAIT on the master of their keys. Create
// it with New; it is safe for concurrent use.
type Syncer struct {
	single  *redis.Client
	cluster *redis.ClusterClient
	timeout time.Duration
	refresh time.Duration

	autoPipeline bool
	busy         func() bool // nil: always auto-pipeline (with autoPipeline)

	mu     sync.Mutex
	counts map[*redis.Client]replicaCount // by master client
}

type replicaCount struct {
	n  int
	at time.Time
}

// Result is what Run learned besides the script's reply.
type Result struct {
	// Replicas is the number of replicas connected to the master
	// (connected_slaves); asked again when Acked fell short of it, so a
	// zero Acked is always judged against a fresh count.
	Replicas int
	// Acked is WAIT's reply: how many replicas acknowledged the script's
	// write within the timeout. It is 0 when WAIT was not sent because the
	// master has no replicas.
	Acked int
	// Waited reports whether WAIT was sent.
	Waited bool
}

// Unsynced reports the rollback case: the master has replicas and none
// acknowledged the write within the timeout.
func (r Result) Unsynced() bool { return r.Replicas > 0 && r.Acked == 0 }

// New returns a Syncer for rdb: a *redis.Client (plain or failover) or a
// *redis.ClusterClient. It does no I/O. It returns ErrUnsupportedClient for
// any other client and ErrInvalidArgument for a nil one or a bad option.
func New(rdb any, opts ...Option) (*Syncer, error) {
	s := &Syncer{timeout: DefaultTimeout, refresh: DefaultRefresh, counts: make(map[*redis.Client]replicaCount)}
	switch c := rdb.(type) {
	case *redis.Client:
		if c == nil {
			return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
		}
		s.single = c
	case *redis.ClusterClient:
		if c == nil {
			return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
		}
		s.cluster = c
	case nil:
		return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
	default:
		return nil, fmt.Errorf("%w, not %T", ErrUnsupportedClient, rdb)
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Timeout returns the WAIT timeout.
func (s *Syncer) Timeout() time.Duration { return s.timeout }

// Master returns the client of the master that serves key: the client
// itself for a *redis.Client, ClusterClient.MasterForKey on a cluster.
func (s *Syncer) Master(ctx context.Context, key string) (*redis.Client, error) {
	if s.single != nil {
		return s.single, nil
	}
	m, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("rlock: finding the master of %q: %w", key, err)
	}
	return m, nil
}

// Run runs script with keys and args on the master of keys[0], followed by
// WAIT <replicas> <timeout> in the same pipeline on the same connection,
// where replicas is the master's connected replica count (cached, see
// WithRefresh; with none, the script alone is sent, without a pipeline).
// It returns the script's
// reply, which the caller reads as with Script.Run, and what WAIT
// reported.
//
// The script goes out as EVALSHA; a NOSCRIPT reply (a fresh or promoted
// master has an empty script cache, and a pipeline has no automatic
// fallback) makes Run send the pipeline again with EVAL, which also caches
// the script. The script then ran once: a NOSCRIPT reply means it did not
// run at all.
//
// On a cluster, Run follows redirects as the ClusterClient does for its own
// commands, at most MaxRedirects times (ClusterOptions): after MOVED (the
// slot has moved to another master) it reloads the client's slot map and
// sends the script and WAIT to the new master; after ASK (the slot is
// being migrated and the key is already on the new master) it sends
// ASKING, the script and WAIT to that master, leaving the slot map as it
// is; after TRYAGAIN (a migration has split the script's keys between two
// masters) it pauses (MinRetryBackoff to MaxRetryBackoff, doubling) and
// starts again from the slot map. None of these replies means the script
// ran. When the redirects are used up, the last reply is returned as the
// error.
//
// Errors: ErrInvalidArgument for no keys or a WAIT timeout not shorter than
// the client's ReadTimeout; Redis errors as they are (the script's own
// error in the returned Cmd, a connection error in both). When the
// connection fails the outcome of the script is unknown, as with any
// command: go-redis may have re-sent the pipeline (MaxRetries), so scripts
// run through Run must tolerate being applied twice, as rlock's do. Run
// does not end early on a cancelled ctx unless the client's
// ContextTimeoutEnabled is set (a pause before following TRYAGAIN does
// end with ctx); it waits for WAIT's reply at most the timeout. On a
// cluster, a connection error (asking for the replica count, or sending
// the script) also makes the ClusterClient reload its slot map in the
// background, so a call after a failover reaches the promoted master.
func (s *Syncer) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, Result, error) {
	if len(keys) == 0 {
		return nil, Result{}, fmt.Errorf("%w: replica sync needs at least one key", base.ErrInvalidArgument)
	}
	m, err := s.Master(ctx, keys[0])
	if err != nil {
		return nil, Result{}, err
	}
	asking := false
	for redirects := 0; ; redirects++ {
		cmd, res, err := s.runOn(ctx, m, asking, script, keys, args)
		if cmd == nil || s.cluster == nil || redirects >= s.cluster.Options().MaxRedirects {
			return cmd, res, err
		}
		next, ask, ok := s.follow(ctx, m, cmd.Err(), redirects, keys[0])
		if !ok {
			return cmd, res, err
		}
		m, asking = next, ask
	}
}

// runOn runs the script, and WAIT when m has replicas, on m; after ASKING
// when asking is set (the first command after it may use a slot that m is
// importing).
func (s *Syncer) runOn(ctx context.Context, m *redis.Client, asking bool, script *redis.Script, keys []string, args []any) (*redis.Cmd, Result, error) {
	if rt := m.Options().ReadTimeout; rt > 0 && s.timeout >= rt {
		return nil, Result{}, fmt.Errorf("%w: replica sync timeout %v is not shorter than the client's ReadTimeout %v", base.ErrInvalidArgument, s.timeout, rt)
	}
	n, err := s.replicas(ctx, m, false)
	if err != nil {
		return nil, Result{}, err
	}

	var cmd *redis.Cmd
	var wait *redis.IntCmd
	if n == 0 && !asking {
		// Nothing to wait for: a plain call (EVALSHA, EVAL on NOSCRIPT),
		// cheaper in the client than a pipeline.
		var sc redis.Scripter = m
		if s.autoPipeline && (s.busy == nil || s.busy()) {
			if sc, err = AutoPipeliner(m); err != nil {
				return nil, Result{}, err
			}
		}
		cmd = script.Run(ctx, sc, keys, args...)
		err = cmd.Err()
	} else {
		cmd, wait, err = s.pipeline(ctx, m, n, asking, script, true, keys, args)
		if err != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd, wait, err = s.pipeline(ctx, m, n, asking, script, false, keys, args)
		}
	}
	s.reloadAfter(ctx, err)
	res := Result{Replicas: n, Waited: wait != nil}
	if err != nil && cmd.Err() == nil {
		// The script ran but WAIT failed (connection lost after the
		// script's reply, say): report it, the write's fate is unknown.
		return cmd, res, fmt.Errorf("rlock: waiting for replicas of %q: %w", keys[0], err)
	}
	if cmd.Err() != nil {
		return cmd, res, cmd.Err()
	}
	if wait != nil {
		acked, err := wait.Result()
		if err != nil {
			return cmd, res, fmt.Errorf("rlock: waiting for replicas of %q: %w", keys[0], err)
		}
		res.Acked = int(acked)
		if res.Acked < n {
			// Fewer than expected: the count may be stale (a replica left,
			// or a failover gave us a master with fewer). Judge a shortfall
			// against a fresh count.
			fresh, err := s.replicas(ctx, m, true)
			if err != nil {
				return cmd, res, err
			}
			res.Replicas = fresh
		}
	}
	return cmd, res, nil
}

// reloadAfter reloads the cluster client's slot map in the background
// when err, from a command sent to a master, is a connection error: the
// slot's master may have failed over, and go-redis would keep routing to
// the dead one for up to its state reload interval. The next call then
// finds the promoted master.
func (s *Syncer) reloadAfter(ctx context.Context, err error) {
	if err != nil && s.cluster != nil && !isRedisError(err) {
		s.cluster.ReloadState(ctx)
	}
}

// pipeline sends the script (EVALSHA, or EVAL with its source) and, when
// n > 0, WAIT n timeout in one pipeline on m; ASKING first when asking is
// set.
func (s *Syncer) pipeline(ctx context.Context, m *redis.Client, n int, asking bool, script *redis.Script, evalsha bool, keys []string, args []any) (*redis.Cmd, *redis.IntCmd, error) {
	pipe := m.Pipeline()
	if asking {
		_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
	}
	var cmd *redis.Cmd
	if evalsha {
		cmd = script.EvalSha(ctx, pipe, keys, args...)
	} else {
		cmd = script.Eval(ctx, pipe, keys, args...)
	}
	var wait *redis.IntCmd
	if n > 0 {
		// Pipeliner has no Wait method; the command is the same.
		wait = redis.NewIntCmd(ctx, "wait", n, s.timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
	}
	_, err := pipe.Exec(ctx)
	return cmd, wait, err
}

// follow decides where the script goes after the reply err from m: the
// next master, whether to send ASKING first, and false when err is not a
// redirect (MOVED, ASK or TRYAGAIN) to follow. redirects is the number of
// redirects followed so far.
func (s *Syncer) follow(ctx context.Context, m *redis.Client, err error, redirects int, key string) (*redis.Client, bool, bool) {
	moved, ask := redis.HasErrorPrefix(err, "MOVED"), redis.HasErrorPrefix(err, "ASK")
	if moved || ask {
		if next := s.node(ctx, redirectAddr(err, m.Options().Addr)); next != nil {
			return next, ask, true
		}
		// A node the cluster does not report (yet): start again from the
		// slot map, reloaded by s.node, after a pause.
	} else if !redis.HasErrorPrefix(err, "TRYAGAIN") {
		return nil, false, false
	}
	if !sleep(ctx, s.backoff(redirects)) {
		return nil, false, false
	}
	next, err := s.Master(ctx, key)
	if err != nil {
		return nil, false, false
	}
	return next, false, true
}

// node reloads the cluster client's slot map (ForEachShard reloads it
// before it visits the nodes) and returns the client of its node at addr,
// or nil if the cluster does not report one there.
func (s *Syncer) node(ctx context.Context, addr string) *redis.Client {
	var mu sync.Mutex
	var found *redis.Client
	_ = s.cluster.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	return found
}

// redirectAddr returns the address of a MOVED or ASK reply ("MOVED <slot>
// <host>:<port>"); an empty host (the server does not know its own) means
// the host of the node that replied, at from.
func redirectAddr(err error, from string) string {
	f := strings.Fields(err.Error())
	addr := f[len(f)-1]
	if strings.HasPrefix(addr, ":") {
		if host, _, err := net.SplitHostPort(from); err == nil {
			addr = net.JoinHostPort(host, addr[1:])
		}
	}
	return addr
}

// backoff returns the pause before the next try after redirects redirects,
// as the ClusterClient pauses: random, from MinRetryBackoff up to
// MinRetryBackoff << redirects, at most MaxRetryBackoff.
func (s *Syncer) backoff(redirects int) time.Duration {
	o := s.cluster.Options()
	lo, hi := o.MinRetryBackoff, o.MaxRetryBackoff
	if lo <= 0 {
		return 0
	}
	d := lo + rand.N(lo<<min(redirects, 20))
	return min(d, max(hi, lo))
}

// sleep waits d or until ctx ends, and reports whether d went by.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Unwaited reports, without I/O, that a script run through s now would be
// sent without WAIT: s syncs a single client (not a cluster) whose master
// had no replica when it was last asked, within the refresh period. False
// when that is not known.
func (s *Syncer) Unwaited() bool {
	if s.single == nil {
		return false
	}
	s.mu.Lock()
	c, ok := s.counts[s.single]
	s.mu.Unlock()
	return ok && c.n == 0 && time.Since(c.at) < s.refresh
}

// Replicas returns the number of replicas connected to the master of key,
// from the cache when fresh enough. A server that answers INFO replication
// with an error reply (miniredis, managed services that hide it) counts as
// having none: nothing is waited on there. On a cluster, a connection
// error makes the ClusterClient reload its slot map in the background, as
// in Run: the master asked may have failed over.
func (s *Syncer) Replicas(ctx context.Context, key string) (int, error) {
	m, err := s.Master(ctx, key)
	if err != nil {
		return 0, err
	}
	return s.replicas(ctx, m, false)
}

func (s *Syncer) replicas(ctx context.Context, m *redis.Client, fresh bool) (int, error) {
	now := time.Now()
	if !fresh {
		s.mu.Lock()
		c, ok := s.counts[m]
		s.mu.Unlock()
		if ok && now.Sub(c.at) < s.refresh {
			return c.n, nil
		}
	}
	info, err := m.Info(ctx, "replication").Result()
	var n int
	var rerr redis.Error
	switch {
	case err == nil:
		if n, err = connectedReplicas(info); err != nil {
			return 0, fmt.Errorf("%w: INFO replication of %s: %w", base.ErrUnexpectedReply, m.Options().Addr, err)
		}
	case errors.As(err, &rerr) && !redis.HasErrorPrefix(err, "LOADING") && !redis.HasErrorPrefix(err, "BUSY"):
		// The server refuses the section (miniredis, some managed
		// services): it reports no replicas, so there is nothing to wait
		// for.
		n = 0
	default:
		s.reloadAfter(ctx, err)
		return 0, fmt.Errorf("rlock: asking %s for its replicas: %w", m.Options().Addr, err)
	}
	s.mu.Lock()
	s.counts[m] = replicaCount{n: n, at: now}
	s.mu.Unlock()
	return n, nil
}

// connectedReplicas reads connected_slaves from INFO replication. A server
// that is itself a replica (a failover in progress) reports an error: a
// write there fails anyway.
func connectedReplicas(info string) (int, error) {
	var n = -1
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 0 {
				return 0, fmt.Errorf("connected_slaves %q", v)
			}
		}
	}
	if n < 0 {
		return 0, errors.New("no connected_slaves field")
	}
	return n, nil
}

// AutoPipelined is a go-redis client with the auto-pipeliner methods:
// Client, ClusterClient and Ring (whose methods report
// redis.ErrRingAutoPipelineUnsupported).
type AutoPipelined interface {
	AsyncAutoPipeline() (*redis.AutoPipeliner, error)
}

// AutoPipeliner returns rdb's deferred go-redis auto-pipeliner
// (AsyncAutoPipeline on a Client or ClusterClient: created on first
// use, then shared by every user of rdb, and stopped when rdb is closed).
// A script run through it (redis.Script.Run) waits for its reply as on the
// blocking face, since reading a command's result waits for it; and a
// command handed to it with Submit can be waited for until a ctx ends,
// which the blocking face cannot do. It reports ErrUnsupportedClient for
// anything else.
func AutoPipeliner(rdb any) (*redis.AutoPipeliner, error) {
	c, ok := rdb.(AutoPipelined)
	if !ok || rdb == nil {
		return nil, fmt.Errorf("%w: %T has no auto-pipeliner", ErrUnsupportedClient, rdb)
	}
	ap, err := c.AsyncAutoPipeline()
	if err != nil {
		return nil, fmt.Errorf("rlock: starting the auto-pipeliner: %w", err)
	}
	return ap, nil
}

// isRedisError reports whether err is a reply of the server (not a
// connection error). Its own function, so that the target errors.As needs
// is allocated only when there is an error to look at.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
