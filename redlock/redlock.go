package redlock

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlock-go/rlock/internal/base"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/reentrant"
)

// DefaultNodeWait is the per-node wait when the context has no deadline
// and WithNodeWait was not given.
const DefaultNodeWait = 500 * time.Millisecond

// RedLock is a lock held on a quorum (n/2+1) of n independent Redis
// masters. Create it with New; it is safe for concurrent use and does no
// I/O until a method is called. The RedLock handle is the default owner,
// as a reentrant handle is; rlock.WithOwner carries an explicit one.
type RedLock struct {
	name     string
	nodes    []node
	lease    time.Duration // 0: watchdog mode
	nodeWait time.Duration // 0: derived from the context
	retryMin time.Duration
	retryMax time.Duration
	quorum   int

	mu      sync.Mutex
	holds   map[string]*holding // by owner ID; "" is the handle itself
	pending map[pendingKey]chan struct{}
	last    *holding
}

var (
	_ rlock.Locker      = (*RedLock)(nil)
	_ rlock.LeaseLocker = (*RedLock)(nil)
)

type node struct {
	lock    *reentrant.Lock
	label   string
	wdLease time.Duration
}

type pendingKey struct {
	owner string
	node  int
}

// holding is one owner's holding of the RedLock.
type holding struct {
	count  int
	held   []bool         // nodes that granted
	nodes  []core.Grant   // by node: what a node that granted reported
	until  time.Time      // end of validity; zero in watchdog mode; guarded by RedLock.mu
	retime chan time.Time // new values of until, for the watcher
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	err    error // written before done is closed
}

func (h *holding) end(err error) {
	h.once.Do(func() {
		h.err = err
		close(h.done)
	})
}

// result returns why h ended; nil after a release or while it lasts.
func (h *holding) result() error {
	if h.ended() {
		return h.err
	}
	return nil
}

func (h *holding) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Option configures a RedLock. A nil Option is ignored.
type Option func(*config) error

type config struct {
	lease              time.Duration
	nodeWait           time.Duration
	retryMin, retryMax time.Duration
	names              []string
}

// WithLease sets the lease of Lock and TryLock (LockLease and TryLockLease
// choose one per call): every node's lock expires d after it was granted
// and nothing renews it; the holder may rely on it until Until, which is d
// minus the acquisition time and the clock drift allowance. d must be at
// least 1 ms. Default: watchdog mode, every node's lock gets its client's
// watchdog lease (30 s by default) and is renewed while held.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		c.lease = d
		return nil
	}
}

// WithNodeWait sets the per-node wait: how long one attempt waits for each
// node's answer. Default: the time left until the context's deadline
// divided by the number of nodes, at least 1 ms (Redisson's rule), or
// DefaultNodeWait when the context has no deadline. d must be positive.
func WithNodeWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: node wait %v is not positive", rlock.ErrInvalidArgument, d)
		}
		c.nodeWait = d
		return nil
	}
}

// WithRetryDelay sets how long Lock waits between two attempts: a random
// time between lo and hi, so that competing clients do not retry in step.
// Default: 20 ms to 200 ms. Both must be positive and lo <= hi.
func WithRetryDelay(lo, hi time.Duration) Option {
	return func(c *config) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("%w: retry delay %v..%v (want 0 < lo <= hi)", rlock.ErrInvalidArgument, lo, hi)
		}
		c.retryMin, c.retryMax = lo, hi
		return nil
	}
}

// WithNodeNames names the nodes in errors (for example by address), in
// the order of the clients given to New. Default: "node 0", "node 1", ...
func WithNodeNames(names ...string) Option {
	return func(c *config) error {
		c.names = append([]string(nil), names...)
		return nil
	}
}

// New returns a RedLock called name over nodes: one rlock client per Redis
// master. The masters must be independent (not replicas of each other, not
// shards of one cluster), or the quorum means nothing. It does no I/O.
// It reports ErrInvalidArgument for no nodes, a nil or repeated client, a
// bad name, WithNodeNames with the wrong count, or a bad option.
//
// Configure each node's go-redis client so that an unreachable node fails
// fast: see the package documentation.
func New(nodes []*rlock.Client, name string, opts ...Option) (*RedLock, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: a RedLock needs at least one node", rlock.ErrInvalidArgument)
	}
	cfg := config{retryMin: 20 * time.Millisecond, retryMax: 200 * time.Millisecond}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.names != nil && len(cfg.names) != len(nodes) {
		return nil, fmt.Errorf("%w: %d node names for %d nodes", rlock.ErrInvalidArgument, len(cfg.names), len(nodes))
	}
	r := &RedLock{
		name:     name,
		nodes:    make([]node, len(nodes)),
		lease:    cfg.lease,
		nodeWait: cfg.nodeWait,
		retryMin: cfg.retryMin,
		retryMax: cfg.retryMax,
		quorum:   len(nodes)/2 + 1,
		holds:    make(map[string]*holding),
		pending:  make(map[pendingKey]chan struct{}),
	}
	seen := make(map[*rlock.Client]int, len(nodes))
	for i, c := range nodes {
		if c == nil {
			return nil, fmt.Errorf("%w: node %d is nil", rlock.ErrInvalidArgument, i)
		}
		if j, ok := seen[c]; ok {
			return nil, fmt.Errorf("%w: nodes %d and %d are the same client", rlock.ErrInvalidArgument, j, i)
		}
		seen[c] = i
		cc, _ := core.Of(c)
		l, err := reentrant.New(c, name)
		if err != nil {
			return nil, err
		}
		label := fmt.Sprintf("node %d", i)
		if cfg.names != nil {
			label = cfg.names[i]
		}
		r.nodes[i] = node{lock: l, label: label, wdLease: cc.Watchdog().LeaseDuration()}
	}
	return r, nil
}

// Name returns the lock's name (its key on every node).
func (r *RedLock) Name() string { return r.name }

// Quorum returns how many nodes must grant the lock: n/2+1 of n.
func (r *RedLock) Quorum() int { return r.quorum }

// Lock blocks until the caller's owner holds the lock on a quorum of
// nodes, or ctx ends. Each attempt is TryLock's; between attempts it waits
// a random retry delay (WithRetryDelay). The per-node wait is derived
// anew for every attempt from the time ctx has left. When ctx ends, Lock
// returns an error wrapping ctx's error (never rlock.ErrNotObtained; the
// last attempt's failure is in its text) and holds nothing more than
// before. Errors other than "not obtained" end it at once, and so does a
// failure on so many closed clients that no quorum is left. A nil ctx, a
// bad owner ID or a bad lease is rlock.ErrInvalidArgument, before any I/O
// (on every method).
func (r *RedLock) Lock(ctx context.Context) error { return r.acquire(ctx, r.lease, true) }

// TryLock makes one attempt: it asks every node in parallel and waits for
// each at most the per-node wait (see WithNodeWait), so a node that is
// down or frozen delays it by that much at most. The lock is obtained when
// a quorum of nodes granted it and its validity (lease - elapsed - clock
// drift allowance, the drift being 1% of the lease + 2 ms; elapsed runs
// from the earliest request sent to a node that granted) is positive.
//
// Otherwise every node that granted is released again (TryLock waits for
// these releases, at most another per-node wait; a node whose answer did
// not arrive gives back a late grant by itself, see the package
// documentation); the error is a *NodeError wrapping
// rlock.ErrNotObtained that lists each failed node and why. When ctx ends
// during the attempt it returns an error wrapping ctx's error instead,
// after the same clean-up.
//
// Re-locking a RedLock this handle holds for the caller's owner only counts
// one more hold (no I/O; the lease stays as it is, see SetLease), as long as
// the holding is neither lost nor past its validity; each successful Lock
// or TryLock needs one Unlock.
func (r *RedLock) TryLock(ctx context.Context) error { return r.acquire(ctx, r.lease, false) }

// LockLease is Lock with lease for this acquisition instead of the
// WithLease setting: a lease of at least 1 ms, or rlock.WatchdogMode.
func (r *RedLock) LockLease(ctx context.Context, lease time.Duration) error {
	return r.acquire(ctx, lease, true)
}

// TryLockLease is TryLock with lease for this acquisition instead of the
// WithLease setting.
func (r *RedLock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return r.acquire(ctx, lease, false)
}

// SetLease changes the lease of the caller's owner's holding on every node
// that granted it, in parallel (see rlock.LeaseLocker): a positive lease
// restarts the validity (Until) from now, rlock.WatchdogMode hands every
// node's lock to its watchdog. It returns an error wrapping
// rlock.ErrNotHeld, without I/O, when this handle holds nothing for the
// owner, and a *NodeError wrapping rlock.ErrNotHeld when fewer than a
// quorum of nodes still held the lock. Like Unlock it runs to completion
// even when ctx is cancelled.
func (r *RedLock) SetLease(ctx context.Context, lease time.Duration) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	owner, err := ownerKey(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	h := r.holds[owner]
	r.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, r.name)
	}
	start := time.Now()
	errs := r.each(h.held, func(l *reentrant.Lock) error { return l.SetLease(ctx, lease) })
	var fails []NodeFailure
	ok := 0
	for i, held := range h.held {
		switch {
		case !held:
		case errs[i] == nil:
			ok++
		default:
			fails = append(fails, NodeFailure{Index: i, Node: r.nodes[i].label, Err: errs[i]})
		}
	}
	if ok < r.quorum {
		return &NodeError{Name: r.name, Op: "set lease", Quorum: r.quorum, Held: ok, Failures: fails, sentinel: rlock.ErrNotHeld}
	}
	var until time.Time
	if lease != rlock.WatchdogMode {
		until = start.Add(lease - Drift(lease))
	}
	r.mu.Lock()
	h.until = until
	select { // keep only the latest value for the watcher
	case <-h.retime:
	default:
	}
	h.retime <- until
	r.mu.Unlock()
	if len(fails) > 0 {
		return &NodeError{Name: r.name, Op: "set lease", Quorum: r.quorum, Held: ok, Failures: fails}
	}
	return nil
}

// ownerKey returns the explicit owner ID ctx carries, "" for the handle
// itself; it rejects a nil ctx and a bad ID with rlock.ErrInvalidArgument.
func ownerKey(ctx context.Context) (string, error) {
	if err := base.CheckContext(ctx); err != nil {
		return "", err
	}
	id, _, err := base.OwnerFrom(ctx)
	return id, err
}

func (r *RedLock) ctxErr(ctx context.Context) error {
	return fmt.Errorf("redlock: waiting for %q: %w", r.name, ctx.Err())
}

func (r *RedLock) acquire(ctx context.Context, lease time.Duration, wait bool) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	owner, err := ownerKey(ctx)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return r.ctxErr(ctx)
	}
	if h := r.reenter(ctx, owner); h != nil {
		report(ctx, h, true)
		return nil
	}
	var timer *time.Timer
	for {
		err := r.attempt(ctx, owner, lease)
		if err == nil || !wait || !errors.Is(err, rlock.ErrNotObtained) || r.hopeless(err) {
			return err
		}
		d := r.retryMin + rand.N(r.retryMax-r.retryMin+1)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", r.ctxErr(ctx), err)
		}
	}
}

// hopeless reports whether so many nodes failed for good (closed client)
// that no later attempt can reach a quorum.
func (r *RedLock) hopeless(err error) bool {
	var ne *NodeError
	if !errors.As(err, &ne) {
		return false
	}
	dead := 0
	for _, f := range ne.Failures {
		if errors.Is(f.Err, rlock.ErrClosed) {
			dead++
		}
	}
	return len(r.nodes)-dead < r.quorum
}

// reenter counts one more hold if owner holds the lock and it is still
// valid, and returns the holding (nil if not). A holding that was lost or
// ran out of validity is dropped and whatever is left of it on the nodes
// released, so that the fresh acquisition that follows starts from
// nothing.
func (r *RedLock) reenter(ctx context.Context, owner string) *holding {
	r.mu.Lock()
	h := r.holds[owner]
	if h == nil {
		r.mu.Unlock()
		return nil
	}
	until := h.until
	if !h.ended() && (until.IsZero() || time.Now().Before(until)) {
		h.count++
		r.mu.Unlock()
		return h
	}
	delete(r.holds, owner)
	r.mu.Unlock()
	h.end(r.expired(until))
	close(h.stop)
	for i, ok := range h.held { // whatever is left; never holds up this call
		if ok {
			r.releaseLater(ctx, owner, i)
		}
	}
	return nil
}

// report tells a combinator acquiring r (see core.Grant) whether the
// acquisition was a re-entry, whose lease it must leave alone, and which
// holding it is part of.
func report(ctx context.Context, h *holding, reentry bool) {
	if g := core.GrantFrom(ctx); g != nil {
		g.Reentry = reentry
		g.Done, g.Err = h.done, h.result
	}
}

func (r *RedLock) expired(until time.Time) error {
	return fmt.Errorf("%w: %q: validity ran out at %v", rlock.ErrLockLost, r.name, until.Format(time.RFC3339Nano))
}

// release releases one hold on each node in which, in parallel, and
// returns the nodes' errors.
func (r *RedLock) release(ctx context.Context, which []bool) []error {
	return r.each(which, func(l *reentrant.Lock) error { return l.Unlock(ctx) })
}

// each runs fn on the nodes in which, in parallel, and returns their
// errors by node.
func (r *RedLock) each(which []bool, fn func(*reentrant.Lock) error) []error {
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i, ok := range which {
		if ok {
			l := r.nodes[i].lock
			wg.Go(func() { errs[i] = fn(l) })
		}
	}
	wg.Wait()
	return errs
}

func (r *RedLock) perNodeWait(ctx context.Context) time.Duration {
	if r.nodeWait > 0 {
		return r.nodeWait
	}
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl)/time.Duration(len(r.nodes)), time.Millisecond)
	}
	return DefaultNodeWait
}

// leaseFor returns the lease the nodes grant for lease: the explicit
// lease, or the shortest watchdog lease among the nodes' clients.
func (r *RedLock) leaseFor(lease time.Duration) time.Duration {
	if lease != rlock.WatchdogMode {
		return lease
	}
	d := r.nodes[0].wdLease
	for _, n := range r.nodes[1:] {
		d = min(d, n.wdLease)
	}
	return d
}

// Drift returns the clock drift allowance subtracted from the lease to get
// the validity: 1% of lease plus 2 ms.
func Drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// attempt is one round over every node, in parallel.
func (r *RedLock) attempt(ctx context.Context, owner string, lease time.Duration) error {
	wait := r.perNodeWait(ctx)
	res := r.askAll(ctx, owner, lease, wait)
	// A node's lock lives at least lease from when its request was sent:
	// the validity runs from the earliest send among the nodes that
	// granted (a wait for an earlier release on a node does not count).
	var start time.Time
	for _, nr := range res {
		if nr.err == nil && (start.IsZero() || nr.sent.Before(start)) {
			start = nr.sent
		}
	}
	elapsed := time.Since(start)

	granted := make([]bool, len(res))
	var fails []NodeFailure
	for i, nr := range res {
		err := nr.err
		if err == nil {
			granted[i] = true
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errNotSent) {
			err = fmt.Errorf("%w (%v)", ErrNodeTimeout, wait)
		}
		fails = append(fails, NodeFailure{Index: i, Node: r.nodes[i].label, Err: err})
	}
	held := len(res) - len(fails)
	if ctx.Err() != nil {
		r.rollback(ctx, owner, granted, wait)
		return r.ctxErr(ctx)
	}
	eff := r.leaseFor(lease)
	validity := eff - elapsed - Drift(eff)
	if held < r.quorum || validity <= 0 {
		r.rollback(ctx, owner, granted, wait)
		e := &NodeError{Name: r.name, Op: "lock", Quorum: r.quorum, Held: held, Failures: fails, sentinel: rlock.ErrNotObtained}
		if held >= r.quorum {
			e.late, e.Validity = true, validity
		}
		return e
	}
	h := &holding{count: 1, held: granted, retime: make(chan time.Time, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for _, nr := range res {
		h.nodes = append(h.nodes, nr.grant)
	}
	if lease != rlock.WatchdogMode {
		h.until = start.Add(validity + elapsed)
	}
	r.mu.Lock()
	if old := r.holds[owner]; old != nil {
		// Another call of this owner won a race with this one: keep one
		// holding that counts both.
		old.count++
		r.mu.Unlock()
		r.rollback(ctx, owner, granted, wait)
		report(ctx, old, true)
		return nil
	}
	r.holds[owner] = h
	r.last = h
	r.mu.Unlock()
	r.watch(h)
	report(ctx, h, false)
	return nil
}

// nodeResult is one node's answer to an attempt.
type nodeResult struct {
	sent  time.Time  // when the request was sent
	err   error      // nil: granted
	grant core.Grant // what the node reported of its grant
}

// askAll asks every node in parallel, each for at most wait.
func (r *RedLock) askAll(ctx context.Context, owner string, lease, wait time.Duration) []nodeResult {
	nctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res := make([]nodeResult, len(r.nodes))
	var wg sync.WaitGroup
	for i := range res {
		wg.Go(func() { res[i] = r.tryNode(nctx, owner, i, lease) })
	}
	wg.Wait()
	return res
}

// errNotSent is a node's failure when its attempt was not even sent.
var errNotSent = errors.New("redlock: an earlier release on the node is still pending")

// tryNode makes one attempt on node i, after any clean-up of an earlier
// attempt of this owner on that node has finished. The node reports its
// grant to this RedLock, never to the RedLock's own caller.
func (r *RedLock) tryNode(ctx context.Context, owner string, i int, lease time.Duration) nodeResult {
	r.mu.Lock()
	p := r.pending[pendingKey{owner, i}]
	r.mu.Unlock()
	if p != nil {
		select {
		case <-p:
		case <-ctx.Done():
			return nodeResult{err: errNotSent}
		}
	}
	nr := nodeResult{sent: time.Now()}
	nr.err = r.nodes[i].lock.TryLockLease(core.WithGrant(ctx, &nr.grant), lease)
	return nr
}

// rollback releases the nodes that granted, and waits for these releases
// at most wait. Nodes whose outcome is unknown (no answer in time, a lost
// reply) are not released here: their client gives back a grant it could
// not report (core: a late grant is released, an unknown outcome settled
// at once), and a release here would take a hold the attempt never got,
// such as one the owner had before.
func (r *RedLock) rollback(ctx context.Context, owner string, granted []bool, wait time.Duration) {
	var waitFor []<-chan struct{}
	for i, ok := range granted {
		if ok {
			waitFor = append(waitFor, r.releaseLater(ctx, owner, i))
		}
	}
	if len(waitFor) == 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, ch := range waitFor {
		select {
		case <-ch:
		case <-timer.C:
			return
		}
	}
}

// releaseLater releases one hold of owner on node i in the background and
// returns a channel closed when done. Until then the node is pending: the
// owner's next attempt on it waits for the release first, so a release can
// never undo a later grant; releases on one node run one after the other.
func (r *RedLock) releaseLater(ctx context.Context, owner string, i int) <-chan struct{} {
	ch := make(chan struct{})
	k := pendingKey{owner, i}
	r.mu.Lock()
	prev := r.pending[k]
	r.pending[k] = ch
	r.mu.Unlock()
	l := r.nodes[i].lock
	uctx := context.WithoutCancel(ctx)
	go func() {
		defer close(ch)
		if prev != nil {
			<-prev
		}
		_ = l.Unlock(uctx) // if it fails, the lease ends the lock
		r.mu.Lock()
		if r.pending[k] == ch {
			delete(r.pending, k)
		}
		r.mu.Unlock()
	}()
	return ch
}

// watch ends h when fewer than a quorum of its nodes still hold the lock
// or when its validity runs out, until it is released (h.stop). It
// watches the holding periods its nodes reported for this acquisition,
// never the node handles' latest, which may be another owner's.
func (r *RedLock) watch(h *holding) {
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.stop)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.retime)},
		{Dir: reflect.SelectRecv}, // the validity timer, when there is one
	}
	var idx []int
	for i, ok := range h.held {
		if ok {
			if h.nodes[i].Done == nil { // not reported: the handle's latest
				h.nodes[i].Done, h.nodes[i].Err = r.nodes[i].lock.Done(), r.nodes[i].lock.Err
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.nodes[i].Done)})
			idx = append(idx, i)
		}
	}
	r.mu.Lock()
	until := h.until // the watcher's copy, changed through h.retime
	r.mu.Unlock()
	go r.watchLoop(h, until, cases, idx)
}

// watchLoop is watch's goroutine: cases are h.stop, h.retime, the validity
// timer (until) and then the holding periods of the nodes idx.
func (r *RedLock) watchLoop(h *holding, until time.Time, cases []reflect.SelectCase, idx []int) {
	const fixed = 3 // stop, retime, timer; then the nodes
	var timer *time.Timer
	setTimer := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, cases[2].Chan = nil, reflect.Value{}
		if !until.IsZero() {
			timer = time.NewTimer(time.Until(until))
			cases[2].Chan = reflect.ValueOf(timer.C)
		}
	}
	setTimer()
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var fails []NodeFailure
	for {
		chosen, v, _ := reflect.Select(cases)
		switch {
		case chosen == 0 || closed(h.stop):
			return // released: Unlock ends h, with what its release found
		case chosen == 1:
			until = v.Interface().(time.Time)
			setTimer()
			continue
		case chosen == 2:
			h.end(r.expired(until))
			return
		}
		i := idx[chosen-fixed]
		err := h.nodes[i].Err()
		if err == nil {
			err = fmt.Errorf("%w: released on the node", rlock.ErrLockLost)
		}
		fails = append(fails, NodeFailure{Index: i, Node: r.nodes[i].label, Err: err})
		if held := len(idx) - 1; held < r.quorum {
			h.end(&NodeError{Name: r.name, Op: "hold", Quorum: r.quorum, Held: held, Failures: fails, sentinel: rlock.ErrLockLost})
			return
		}
		cases = slices.Delete(cases, chosen, chosen+1)
		idx = slices.Delete(idx, chosen-fixed, chosen-fixed+1)
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Unlock releases one hold of the caller's owner. The last one releases
// the lock on every node that granted it, in parallel, and waits for all
// of them; like the reentrant lock's Unlock it runs to completion even when
// ctx is cancelled, bounded by the Redis clients' timeouts.
//
// It returns an error wrapping rlock.ErrNotHeld, without I/O, when this
// handle holds nothing for the owner. When the holding had ended by loss
// before (see Err), or its validity had run out, Unlock ends it whatever
// holds remain, releases what is left on the nodes and returns that error
// (wrapping rlock.ErrLockLost), joined with any release failure. When the release finds fewer than a
// quorum of nodes still holding the lock (it was lost: expired, force-
// unlocked, nodes restarted), or some node fails, it returns a *NodeError
// listing the nodes; it wraps rlock.ErrNotHeld in the first case, and the
// holding then ends as lost (Err wraps rlock.ErrLockLost), not released.
func (r *RedLock) Unlock(ctx context.Context) error {
	owner, err := ownerKey(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	h := r.holds[owner]
	if h == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, r.name)
	}
	var lost error
	if h.ended() {
		lost = h.err
	} else if !h.until.IsZero() && !time.Now().Before(h.until) {
		lost = r.expired(h.until)
	}
	h.count--
	if h.count > 0 && lost == nil {
		r.mu.Unlock()
		return nil
	}
	// The last hold, or a lost holding: it ends here, whatever holds
	// remain (they are answered ErrNotHeld).
	delete(r.holds, owner)
	r.mu.Unlock()
	close(h.stop) // the watcher stops: the release's findings end h
	err = r.releaseAll(ctx, h)
	var ne *NodeError
	if lost == nil && errors.As(err, &ne) && ne.sentinel == rlock.ErrNotHeld {
		found := *ne
		found.sentinel = rlock.ErrLockLost // the holding ended by loss, found here
		lost = &found
		h.end(lost)
		return err
	}
	h.end(lost)
	if lost != nil {
		return errors.Join(lost, err)
	}
	return err
}

// releaseAll releases h on every node that granted it, in parallel. It
// returns a *NodeError wrapping rlock.ErrNotHeld when fewer than a quorum
// still held it, a *NodeError listing the nodes that failed otherwise, or
// nil.
func (r *RedLock) releaseAll(ctx context.Context, h *holding) error {
	errs := r.release(ctx, h.held)
	var fails []NodeFailure
	still := 0
	for i, ok := range h.held {
		if !ok {
			continue
		}
		if errs[i] == nil {
			still++
			continue
		}
		fails = append(fails, NodeFailure{Index: i, Node: r.nodes[i].label, Err: errs[i]})
		if !errors.Is(errs[i], rlock.ErrNotHeld) {
			still++ // unknown: maybe still held until its lease ends
		}
	}
	switch {
	case still < r.quorum:
		return &NodeError{Name: r.name, Op: "unlock", Quorum: r.quorum, Held: still, Failures: fails, sentinel: rlock.ErrNotHeld}
	case len(fails) > 0:
		return &NodeError{Name: r.name, Op: "unlock", Quorum: r.quorum, Held: still, Failures: fails}
	}
	return nil
}

// Until returns the end of the validity of the last acquisition made
// through this handle: the instant before which the holder may rely on
// holding the lock on a quorum of nodes when it has an explicit lease
// (WithLease). It is the zero time in watchdog mode, where renewal extends
// the lock while held (watch Done instead), and before the first
// acquisition.
func (r *RedLock) Until() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return time.Time{}
	}
	return r.last.until
}

// Done returns a channel that is closed when the holding of the last
// acquisition made through this handle ends: by the last Unlock, or by
// loss (see Err). Before the first acquisition it returns a closed channel.
func (r *RedLock) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return closedChan
	}
	return r.last.done
}

// Err returns nil while the holding of the last acquisition goes on or
// when it ended by Unlock. After a loss it returns an error wrapping
// rlock.ErrLockLost: the validity of a lock with an explicit lease ran out,
// or so many nodes lost the lock (watchdog renewal found it gone, a node
// restarted, it was force-unlocked; also when the last Unlock finds it so)
// that fewer than a quorum still hold it; the error is then a *NodeError
// naming them.
func (r *RedLock) Err() error {
	r.mu.Lock()
	h := r.last
	r.mu.Unlock()
	if h == nil || !h.ended() {
		return nil
	}
	return h.err
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
