package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/history"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
)

// This file holds the workers' calls that follow a fault with something
// other than a repeat of the failed call: a different call after an
// unknown outcome (cfg.settle), a re-entry asking for a lease shorter than
// the critical section (cfg.leases), and a force unlock whose re-send
// comes late (cfg.force).

// roundSettle is round for a worker that does not repeat a call whose
// outcome was unknown (cfg.settle): it reads its hold count and goes on
// from there with other calls, as a user must who cannot tell what the
// failed call did (Lock twice, an Unlock whose reply was lost, another
// Unlock). A holding period: an acquisition (Lock, or a TryLock that may
// be refused), up to three calls chosen at random among Lock, TryLock and
// Unlock while the worker holds the lock, a short critical section, then
// Unlock until the count replied or read is zero.
func (w *worker) roundSettle() error {
	first := history.Lock
	if w.rng.IntN(4) == 0 {
		first = history.TryLock
	}
	call := w.r.rec.Now()
	count, out, err := w.once(first, 0)
	if err != nil || count == 0 {
		return err
	}
	w.acquired++
	// The holding period is this handle's last only if the call said so;
	// a hold learnt from a count read has no Done to watch (nil: never
	// closes), nor a token known to be its own.
	var done <-chan struct{}
	if out == history.OK {
		done = w.l.Done()
		w.r.grantsMu.Lock()
		w.r.grants = append(w.r.grants, grant{owner: w.id, call: call, ret: w.r.rec.Now(), token: w.l.Token()})
		w.r.grantsMu.Unlock()
	}
	cw := w.watch(done)
	defer cw.end()
	lost := false
	for range w.rng.IntN(4) {
		k := []history.Kind{history.Lock, history.TryLock, history.Unlock}[w.rng.IntN(3)]
		if count, out, err = w.once(k, count); err != nil {
			return err
		}
		if out == history.NotObtained || out == history.HoldsLost || out == history.NotHeld || closed(done) {
			lost = true
			break
		}
		if count == 0 {
			break
		}
	}
	if count > 0 && !lost {
		select {
		case w.r.inside <- w.id:
		default:
		}
		timer := time.NewTimer(time.Duration(w.rng.Int64N(int64(w.r.cfg.section) + 1)))
		select {
		case <-done:
			lost = true
		case <-timer.C:
		}
		timer.Stop()
	}
	releaseCall := w.r.rec.Now()
	for count > 0 {
		if count, out, err = w.once(history.Unlock, count); err != nil {
			return err
		}
		lost = lost || out == history.NotHeld
	}
	if at := cw.end(); at != 0 && (at < releaseCall || lost) {
		lost = true
		w.r.rec.Add(history.Op{Owner: w.id, Kind: history.Lost, Outcome: history.OK, Call: at, Return: at})
	}
	if lost {
		w.lost++
	}
	return nil
}

// once makes one call of kind k, records it as it is, and returns the
// worker's hold count after it (count before). When the outcome is
// unknown the call is not repeated: the library carries out what it
// meant, so a release counts as done and an acquisition as not made; the
// worker reads its hold count too, which the history records.
func (w *worker) once(k history.Kind, count int) (int, history.Outcome, error) {
	return w.onceFn(k, count, w.call(k))
}

// onceFn is once for fn, a call of kind k on the lock.
func (w *worker) onceFn(k history.Kind, count int, fn func(context.Context) error) (int, history.Outcome, error) {
	ctx := w.ctx()
	defer w.act.begin(k == history.Unlock || w.shortening)() // through the count read below
	call := w.r.rec.Now()
	err := fn(ctx)
	if err != nil && w.r.cfg.forbid != nil && w.r.cfg.forbid(err) {
		w.r.forbidden.Add(1)
		w.r.forbiddenLast.Store(err.Error())
	}
	out := history.Classify(k, err)
	w.r.rec.Add(history.Op{Owner: w.id, Kind: k, Outcome: out, Call: call, Return: w.r.rec.Now(), Err: err})
	switch out {
	case history.OK:
		if k == history.Unlock {
			return count - 1, out, nil
		}
		return count + 1, out, nil
	case history.NotObtained:
		return 0, out, nil // a re-entry refused: the worker's holds are gone
	case history.NotHeld, history.HoldsLost:
		return 0, out, nil
	}
	if ctx.Err() != nil {
		return count, out, fmt.Errorf("%v still failing at the end of the run: %w", k, err)
	}
	// The library carries out what the call meant (see do): a release is
	// completed; a hold an acquisition may have taken is given back, which
	// the history records as a release of unknown outcome. The read pins
	// down the state at its moment.
	w.unknown++
	if k != history.Unlock {
		w.r.rec.Add(history.Op{Owner: w.id, Kind: history.Unlock, Outcome: history.Unknown, Call: call, Return: w.r.rec.Now()})
	}
	if _, err := w.readCount(); err != nil {
		return count, out, err
	}
	if k == history.Unlock {
		return count - 1, out, nil
	}
	return count, out, nil
}

// readCount reads the worker's hold count, repeating the read until it
// answers (a read changes nothing), and records it.
func (w *worker) readCount() (int, error) {
	ctx := w.ctx()
	for {
		call := w.r.rec.Now()
		n, err := w.l.HoldCount(ctx)
		if err == nil {
			w.r.rec.Add(history.Op{Owner: w.id, Kind: history.Count, Outcome: history.OK, Call: call, Return: w.r.rec.Now(), Value: n})
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("reading the hold count at the end of the run: %w", err)
		}
		timer := time.NewTimer(5 * time.Millisecond)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
}

// shortLease is the explicit lease of cfg.leases' re-entries, and
// leaseSection the shortest critical section that follows them: well past
// the lease, so a hold left to it expires inside the section.
const (
	shortLease   = 50 * time.Millisecond
	leaseSection = 120 * time.Millisecond
)

// leaseReentry re-enters the lock the worker holds (count holds) in
// watchdog mode, asking for a lease shorter than the critical section that
// follows: either LockLease(ctx, shortLease), or a MultiLock with that
// lease over the lock and the worker's private lock, taken and released
// again. Either way the hold the worker had must stay protected by the
// watchdog. It returns the outcome of the acquisition and the worker's
// hold count after it.
func (w *worker) leaseReentry(count int) (history.Outcome, int, error) {
	w.shortening = true
	defer func() { w.shortening = false }()
	if w.rng.IntN(2) == 0 {
		out, after, _, err := w.doFn(history.Lock, count, func(ctx context.Context) error { return w.l.LockLease(ctx, shortLease) })
		return out, after, err
	}
	ml, err := multilock.New([]rlock.Locker{w.l, w.private}, multilock.WithLease(shortLease))
	require.NoError(w.r.t, err)
	// On the lock, the MultiLock is a re-entry and a release.
	out, after, _, err := w.doFn(history.TryLock, count, ml.TryLock)
	if err != nil || out != history.OK {
		return out, after, err
	}
	out, after, _, err = w.doFn(history.Unlock, after, ml.Unlock)
	if err != nil {
		return out, after, err
	}
	if out == history.NotHeld {
		return history.HoldsLost, 0, nil
	}
	return history.OK, after, nil
}

// forcer force-unlocks the run's lock now and then (an operator's tool,
// say) through a client of its own, behind a proxy that loses the reply of
// every force unlock after the server ran it; go-redis re-sends it on a
// new connection, whose dial is delayed long enough for a worker to take
// the lock meanwhile. Its calls are recorded as those of one more owner.
type forcer struct {
	id    int // its owner number in the history
	r     *rig
	proxy *redistest.Proxy
	rdb   *redis.Client
	gate  *redialDelay
	l     handle
}

func newForcer(r *rig, seed uint64) *forcer {
	t := r.t
	// Every script cached: a lost reply must be one of a script that ran,
	// not a NOSCRIPT.
	for _, s := range lua.All() {
		require.NoError(t, s.Load(context.Background(), r.direct).Err())
	}
	f := &forcer{id: len(r.workers), r: r, proxy: redistest.NewProxy(t, r.b.Addr),
		gate: &redialDelay{rec: r.rec, rng: rand.New(rand.NewPCG(seed, 1<<40))}}
	f.rdb = r.b.NewClient(t, func(o *redis.Options) {
		o.Addr = f.proxy.Addr()
		o.PoolSize = 1 // so the re-send dials
		o.MaxRetries = 3
	})
	f.rdb.AddHook(f.gate)
	c, err := rlock.NewClient(f.rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	f.l = r.newHandle(c, r.name)
	return f
}

// run force-unlocks the lock every 5-20 ms until stop is closed; two
// times in three it first waits (up to 50 ms) until it sees the lock free,
// when a re-send that acts again would delete a lock taken after the first
// run.
func (f *forcer) run(stop <-chan struct{}) {
	for !sleepOrStop(time.Duration(5+f.gate.intN(16))*time.Millisecond, stop) {
		if f.gate.intN(3) > 0 {
			f.awaitFree(stop)
		}
		f.forceUnlock()
	}
}

// awaitFree polls the lock until it is free, for at most 50 ms.
func (f *forcer) awaitFree(stop <-chan struct{}) {
	for range 50 {
		if n, err := f.r.direct.Exists(f.r.ctx, f.r.name).Result(); err == nil && n == 0 {
			return
		}
		if sleepOrStop(time.Millisecond, stop) {
			return
		}
	}
}

// forceUnlock force-unlocks the lock and records the call. A re-sent force
// unlock must not act again, so the call is recorded as taking effect
// before the re-send's connection was dialled (when its first run had
// certainly happened): a re-send that deletes the lock a worker took
// meanwhile shows as a reply the lock's state then cannot explain, or as a
// holder losing a lock nobody removed.
func (f *forcer) forceUnlock() {
	ctx := f.r.ctx
	if f.rdb.Ping(ctx).Err() != nil { // an idle connection for the first send
		return
	}
	f.proxy.DropNextReply("evalsha")
	defer f.proxy.DropReplies("", 0)
	dialed := f.gate.arm()
	call := f.r.rec.Now()
	ok, err := f.l.ForceUnlock(ctx)
	op := history.Op{Owner: f.id, Kind: history.ForceUnlock, Outcome: history.Unknown, Call: call, Return: f.r.rec.Now(), Err: err}
	if err == nil {
		op.Outcome = history.OK
		if ok {
			op.Value = 1
		}
		if at := dialed(); at != 0 && at < op.Return {
			op.Return = at
		}
	}
	f.r.rec.Add(op)
}

// redialDelay is a go-redis hook that, when armed, records the time of the
// next dial (on the Recorder's clock) and delays it by 20-80 ms.
type redialDelay struct {
	rec *history.Recorder
	mu  sync.Mutex
	rng *rand.Rand
	on  bool
	at  int64
}

func (d *redialDelay) intN(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

// arm arms the delay and returns a function that reports the time of the
// delayed dial (0: none).
func (d *redialDelay) arm() func() int64 {
	d.mu.Lock()
	d.on, d.at = true, 0
	d.mu.Unlock()
	return func() int64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.on = false
		return d.at
	}
}

func (d *redialDelay) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		delay := time.Duration(0)
		if d.on {
			d.on, d.at = false, d.rec.Now()
			delay = time.Duration(20+d.rng.IntN(61)) * time.Millisecond
		}
		d.mu.Unlock()
		if delay > 0 {
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
			}
		}
		return next(ctx, network, addr)
	}
}

func (d *redialDelay) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *redialDelay) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// errInjected is the failure scriptFaults injects: an error reply that
// trying again does not mend (a blocking Lock outlives transient errors
// such as a refused connection, and returns only final ones).
var errInjected error = injectedReply("ERR injected")

type injectedReply string

func (e injectedReply) Error() string { return string(e) }

// RedisError makes it a Redis error reply for go-redis (redis.Error).
func (injectedReply) RedisError() {}

// scriptFaults is a go-redis hook on a client's scripts: it counts, per
// argument, the scripts that completed (an owner field among the arguments
// counts that owner's attempts), and, when armed, fails the next script
// before it is sent, as a refused connection would.
type scriptFaults struct {
	mu       sync.Mutex
	done     map[string]int
	inFlight int
	failNext bool
}

func newScriptFaults() *scriptFaults { return &scriptFaults{done: map[string]int{}} }

// completed returns how many scripts with arg among their arguments
// completed, and how many scripts are in flight.
func (s *scriptFaults) completed(arg string) (n, inFlight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[arg], s.inFlight
}

// fail arms the failure of the next script.
func (s *scriptFaults) fail() {
	s.mu.Lock()
	s.failNext = true
	s.mu.Unlock()
}

// start reports whether cmds (scripts) may go out, and counts them in
// flight if so.
func (s *scriptFaults) start() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext {
		s.failNext = false
		return false
	}
	s.inFlight++
	return true
}

func (s *scriptFaults) end(cmds ...redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	for _, cmd := range cmds {
		for _, a := range cmd.Args() {
			if arg, ok := a.(string); ok {
				s.done[arg]++
			}
		}
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

func (s *scriptFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd) {
			return next(ctx, cmd)
		}
		if !s.start() {
			cmd.SetErr(errInjected)
			return errInjected
		}
		defer s.end(cmd)
		return next(ctx, cmd)
	}
}

func (s *scriptFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, isScript) {
			return next(ctx, cmds)
		}
		if !s.start() {
			for _, cmd := range cmds {
				cmd.SetErr(errInjected)
			}
			return errInjected
		}
		defer s.end(cmds...)
		return next(ctx, cmds)
	}
}
