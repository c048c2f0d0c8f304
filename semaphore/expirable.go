package semaphore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/renewal"
)

// NoLeaseScore is the score Redisson gives a permit without a lease in
// the timeout set ("never expires"). rlock never writes it: its permits
// without a lease carry the watchdog's lease and are renewed; it reads it
// in permits Redisson took.
const NoLeaseScore = base.SemaphoreNoLeaseScore

// Expirable is a handle on one semaphore whose permits have IDs and
// leases, Redisson's RPermitExpirableSemaphore: the counter of available
// permits under the name, the held permits in "{name}:timeout" (raw
// 16-byte IDs scored by their expiry in epoch ms), and the channel
// "redisson_sc:{name}" shared with the counting semaphore. Every script
// first returns the permits whose lease has passed to the pool. Create it
// with NewExpirable; it is cheap, does no I/O and is safe for concurrent
// use.
type Expirable struct {
	s        *Semaphore // the counter, channel, operation record and registry of waiting clients
	timeout  string
	watchKey string // the expiry watch (see exp_common.lua)
}

// NewExpirable returns a handle on the expirable semaphore name of client.
// It does no I/O. It reports ErrInvalidArgument as New does.
func NewExpirable(client *rlock.Client, name string, opts ...Option) (*Expirable, error) {
	s, err := New(client, name, opts...)
	if err != nil {
		return nil, err
	}
	return &Expirable{s: s, timeout: suffixed(name, "timeout"), watchKey: base.SemaphoreWatch(name)}, nil
}

// Name returns the semaphore's name, the key of its counter.
func (e *Expirable) Name() string { return e.s.name }

// AcquireOption configures one Acquire or TryAcquire of an Expirable.
type AcquireOption func(*acquireConfig) error

type acquireConfig struct{ lease time.Duration }

// WithLease gives the permit a lease: it is returned to the pool once d
// has passed unless released or its lease updated first, and nothing
// renews it. Without it (the default), the permit gets the client's
// watchdog lease (rlock.WithWatchdogLease, 30 s by default) and is renewed
// every watchdog interval while the process lives, so a crashed holder's
// permit returns within one watchdog lease. d must be at least 1 ms.
func WithLease(d time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: lease %v is less than 1ms", rlock.ErrInvalidArgument, d)
		}
		c.lease = d
		return nil
	}
}

func acquireOptions(opts []AcquireOption) (acquireConfig, error) {
	var cfg acquireConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Acquire takes one permit, waiting until one is available: woken by a
// release on any client, when a held permit's lease passes (one rlock
// client reclaims it at its expiry and wakes a waiter for it; see the
// package doc), and at least every poll interval. It returns the
// held permit; ctx's error when ctx ends first (a grant that raced with
// it is given back); rlock.ErrClosed when the client closes;
// rlock.ErrInvalidArgument for a bad option; rlock.ErrWrongType when the
// counter holds something else; an error wrapping rlock.ErrUnreachable
// when Redis has not answered for the client's unreachable timeout
// (rlock.WithUnreachableTimeout): failures to reach it are ridden through
// until then, as a waiting Lock does (an attempt whose reply was lost is
// given back first); or any other error of the Redis client. A grant that
// no replica acknowledged (replica sync, see the package doc) is given
// back and tried again after a pause.
func (e *Expirable) Acquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	ps, err := e.AcquireN(ctx, 1, opts...)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// MaxPermitsPerCall bounds n in AcquireN and TryAcquireN: each permit is
// one argument of one script call.
const MaxPermitsPerCall = 1000

// AcquireN takes n permits at once, all or none (Redisson's acquire(n)),
// waiting as Acquire does until n are available; each permit has its own
// ID, lease (the option applies to each) and handle. It returns
// rlock.ErrInvalidArgument for n < 1 or n > MaxPermitsPerCall; otherwise
// as Acquire.
func (e *Expirable) AcquireN(ctx context.Context, n int, opts ...AcquireOption) ([]*Permit, error) {
	cfg, err := acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkPerCall(n); err != nil {
		return nil, err
	}
	if e.s.c.Closed() {
		return nil, rlock.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wc, err := e.s.enterWaiting(ctx)
	if err != nil {
		return nil, err
	}
	defer wc.exit()
	var failed core.Outlive
	ps, r, err := e.attemptN(ctx, cfg, n, waiting{register: true})
	pause, err := e.s.c.Outlive(&failed, e.s.name, err)
	if err != nil || ps != nil {
		return ps, err
	}
	wc.refused()
	e.watching(r)
	w, joined := e.s.c.Hub().JoinCounting(e.s.channel, e.s.passOn)
	if !joined {
		return nil, rlock.ErrClosed
	}
	defer w.Leave()
	timer := time.NewTimer(e.s.wait(pause))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.s.c.Closing():
			return nil, rlock.ErrClosed
		case <-w.C:
		case <-timer.C:
		}
		last := wc.alone()
		ps, r, err = e.attemptN(ctx, cfg, n, waiting{register: true, last: last})
		if pause, err = e.s.c.Outlive(&failed, e.s.name, err); err != nil {
			return nil, err
		}
		if ps != nil {
			if last {
				wc.grantedLast()
			}
			if r.left > 0 {
				w.WakeNext() // more permits for the next waiter of this client
			}
			return ps, nil
		}
		wc.refused()
		e.watching(r)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(e.s.wait(pause))
	}
}

// checkPerCall checks a permit count of AcquireN or TryAcquireN.
func checkPerCall(n int) error {
	if n < 1 || n > MaxPermitsPerCall {
		return fmt.Errorf("%w: %d permits in one call: want 1..%d", rlock.ErrInvalidArgument, n, MaxPermitsPerCall)
	}
	return nil
}

// TryAcquire takes one permit if one is available now (after reclaiming
// expired ones). It returns nil and no error when none is. A grant that no
// replica acknowledged (replica sync, see the package doc) is given back
// exactly once, and nil returned with an error wrapping
// rlock.ErrNotReplicated. Other errors are as Acquire's.
func (e *Expirable) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	ps, err := e.TryAcquireN(ctx, 1, opts...)
	if err != nil || ps == nil {
		return nil, err
	}
	return ps[0], nil
}

// TryAcquireN takes n permits if n are available now (after reclaiming
// expired ones), all or none; it returns nil and no error when fewer are.
// Errors are as TryAcquire's.
func (e *Expirable) TryAcquireN(ctx context.Context, n int, opts ...AcquireOption) ([]*Permit, error) {
	cfg, err := acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkPerCall(n); err != nil {
		return nil, err
	}
	if e.s.c.Closed() {
		return nil, rlock.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps, _, err := e.attemptN(ctx, cfg, n, waiting{})
	return ps, err
}

// attemptReply is what an acquire attempt learned beside its permits:
// the permits left available after a grant, or, after a refusal, the
// nearest expiry of a held permit (zero: none known) and whether this
// client watches it (see watching).
type attemptReply struct {
	left  int64
	next  time.Time
	watch bool
}

// attemptN runs the acquire script once with a fresh permit ID (which is
// also the operation ID: a re-sent copy finds the permit and takes no
// second one). A lost reply or a ctx that ended meanwhile gives the permit
// back. It returns the permits, or nil and what the refusal said.
//
// It takes n permits, all or none, each with its own fresh ID; the
// first's is the operation ID. A call that waits (wt) registers its
// client when refused, as the counting semaphore's does, and may take the
// expiry watch.
func (e *Expirable) attemptN(ctx context.Context, cfg acquireConfig, n int, wt waiting) ([]*Permit, attemptReply, error) {
	raws := make([][]byte, n)
	ids := make([]string, n)
	for i := range raws {
		raws[i] = make([]byte, 16)
		_, _ = rand.Read(raws[i])
		ids[i] = hex.EncodeToString(raws[i])
	}
	lease := cfg.lease
	if lease == 0 {
		lease = e.s.c.Watchdog().LeaseDuration()
	}
	sent := time.Now()
	pub := e.s.c.PublishArg(detached(ctx))
	mode := "0"
	if wt.register {
		mode = "1"
		if wt.last {
			mode = "2"
		}
	}
	args := []any{raws[0], sent.Add(lease).UnixMilli(), sent.UnixMilli(), NoLeaseScore, pub, ids[0],
		e.s.desig, e.s.live().Milliseconds(), mode}
	for _, raw := range raws[1:] {
		args = append(args, raw)
	}
	giveBack := func() error {
		var first error
		for i := range raws {
			if _, err := e.release(ctx, raws[i], ids[i], true); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	cmd, synced := e.s.c.RunSynced(detached(ctx), lua.ExpAcquire,
		[]string{e.s.name, e.timeout, e.s.channel, e.s.ops, e.s.waiters, e.watchKey}, args...)
	res, err := cmd.Int64Slice()
	if err == nil && len(res) == 0 {
		err = fmt.Errorf("%w: acquire replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		if isReply(err) {
			return nil, attemptReply{}, e.s.scriptErr("acquire", err)
		}
		if cerr := giveBack(); cerr != nil {
			return nil, attemptReply{}, fmt.Errorf("semaphore %q: acquire failed (%w), and giving back what it may have taken failed too: %w", e.s.name, err, cerr)
		}
		return nil, attemptReply{}, err
	}
	if res[0] != 1 {
		var r attemptReply
		if len(res) > 1 && res[1] > 0 {
			r.next = time.UnixMilli(res[1])
			r.watch = len(res) > 2 && res[2] == 1
		}
		return nil, r, nil
	}
	if len(res) > 2 && res[2] > 0 { // the grant handed this client the watch
		e.watching(attemptReply{next: time.UnixMilli(res[2]), watch: true})
	}
	if synced.Unsynced() {
		// The grant may be lost on failover: give the permits back (each
		// release by ID returns its permit once, whatever copies ran).
		why := fmt.Errorf("%w: semaphore %q: %s", rlock.ErrNotReplicated, e.s.name, synced.Describe(fmt.Sprintf("the acquire of %d permits", n)))
		if cerr := giveBack(); cerr != nil {
			return nil, attemptReply{}, fmt.Errorf("%w (and giving the permits back failed: %w)", why, cerr)
		}
		return nil, attemptReply{}, why
	}
	if err := ctx.Err(); err != nil {
		if cerr := giveBack(); cerr != nil {
			return nil, attemptReply{}, fmt.Errorf("semaphore %q: %w after a grant; giving it back failed: %w", e.s.name, err, cerr)
		}
		return nil, attemptReply{}, err
	}
	ps := make([]*Permit, n)
	for i := range ps {
		ps[i] = newPermit(e, raws[i], ids[i], cfg.lease, sent)
	}
	var r attemptReply
	if len(res) > 1 {
		r.left = res[1]
	}
	return ps, r, nil
}

// release runs the release script for permit raw (hex id); cancel also
// marks its acquire given back. It retries under the same ID when the
// reply is lost. It reports whether the permit was held with its lease
// running.
func (e *Expirable) release(ctx context.Context, raw []byte, id string, cancel bool) (bool, error) {
	mode := ""
	if cancel {
		mode = "cancel"
	}
	pub := e.s.c.PublishArg(detached(ctx))
	op := e.s.c.RequestID()
	var err error
	for range 3 {
		var v int64
		v, err = e.s.c.Run(detached(ctx), lua.ExpRelease, []string{e.s.name, e.s.channel, e.timeout, e.s.ops, e.s.waiters},
			raw, time.Now().UnixMilli(), pub, e.s.c.ReplayWindow(), id, mode, op).Int64()
		if err == nil {
			return v == 1, nil
		}
		if isReply(err) {
			return false, e.s.scriptErr("release", err)
		}
	}
	return false, fmt.Errorf("semaphore %q: release: %w", e.s.name, err)
}

// parseID checks a permit ID: 32 lowercase hex characters.
func parseID(id string) ([]byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 16 || hex.EncodeToString(raw) != id {
		return nil, fmt.Errorf("%w: permit ID %q is not 32 lowercase hex characters", rlock.ErrInvalidArgument, id)
	}
	return raw, nil
}

// Release returns the permit with ID id (see Permit.ID; also one taken by
// another process, Redisson's included) to the pool. It returns
// rlock.ErrNotHeld when no such permit is held (never taken, released
// already, or its lease had passed: then it was returned to the pool
// anyway, as Redisson does), rlock.ErrInvalidArgument for an ID that is
// not 32 lowercase hex characters, or the Redis client's error. Applied
// once: a re-sent copy is recognised. The Permit handle of this process,
// if any, is not told (use Permit.Release for that).
func (e *Expirable) Release(ctx context.Context, id string) error {
	ok, err := e.TryRelease(ctx, id)
	if err == nil && !ok {
		err = fmt.Errorf("%w: permit %s of semaphore %q", rlock.ErrNotHeld, id, e.s.name)
	}
	return err
}

// TryRelease is Release reporting false instead of rlock.ErrNotHeld.
func (e *Expirable) TryRelease(ctx context.Context, id string) (bool, error) {
	raw, err := parseID(id)
	if err != nil {
		return false, err
	}
	return e.release(ctx, raw, id, false)
}

// UpdateLease sets the lease of the held permit id to d from now (after
// reclaiming expired permits, so a permit whose lease passed is not
// revived), and reports whether the permit was held. d must be at least
// 1 ms. A Permit handle of this process is not told; use Permit.SetLease.
func (e *Expirable) UpdateLease(ctx context.Context, id string, d time.Duration) (bool, error) {
	raw, err := parseID(id)
	if err != nil {
		return false, err
	}
	if d < time.Millisecond {
		return false, fmt.Errorf("%w: lease %v is less than 1ms", rlock.ErrInvalidArgument, d)
	}
	now := time.Now()
	return e.update(ctx, raw, now.Add(d), now)
}

func (e *Expirable) update(ctx context.Context, raw []byte, until, now time.Time) (bool, error) {
	res, err := e.s.c.Run(ctx, lua.ExpUpdate, []string{e.s.name, e.timeout, e.s.channel, e.s.waiters, e.watchKey},
		raw, until.UnixMilli(), now.UnixMilli(), e.s.c.PublishArg(ctx), e.s.desig, e.s.live().Milliseconds(), NoLeaseScore).Int64Slice()
	if err == nil && len(res) == 0 {
		err = fmt.Errorf("%w: update lease replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		return false, e.s.scriptErr("update lease", err)
	}
	if len(res) > 1 {
		e.watching(attemptReply{next: time.UnixMilli(res[1]), watch: res[1] > 0})
	}
	return res[0] == 1, nil
}

// AvailablePermits returns the permits available now, after returning
// expired ones to the pool. Errors are as the counting semaphore's.
func (e *Expirable) AvailablePermits(ctx context.Context) (int64, error) {
	a, _, err := e.state(ctx)
	return a, err
}

// AcquiredPermits returns how many permits are held now, after returning
// expired ones to the pool.
func (e *Expirable) AcquiredPermits(ctx context.Context) (int64, error) {
	_, h, err := e.state(ctx)
	return h, err
}

func (e *Expirable) state(ctx context.Context) (int64, int64, error) {
	res, err := e.s.c.Run(ctx, lua.ExpState, []string{e.s.name, e.timeout, e.s.channel, e.s.waiters},
		time.Now().UnixMilli(), e.s.c.PublishArg(ctx)).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%w: state replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		return 0, 0, e.s.scriptErr("state", err)
	}
	return res[0], res[1], nil
}

// LeaseTime returns the remaining lease of the held permit id (Redisson's
// getLeaseTime), after returning expired permits to the pool: the time
// until it returns to the pool unless released or renewed (a permit this
// process took without a lease has its watchdog's, pushed back every
// renewal); -1 for a permit with Redisson's no-lease score, which never
// expires. It returns rlock.ErrNotHeld when no such permit is held,
// rlock.ErrInvalidArgument for an ID that is not 32 lowercase hex
// characters, rlock.ErrWrongType for a counter of another type, or the
// Redis client's error (also ctx's end).
func (e *Expirable) LeaseTime(ctx context.Context, id string) (time.Duration, error) {
	raw, err := parseID(id)
	if err != nil {
		return 0, err
	}
	res, err := e.s.c.Run(ctx, lua.ExpLease, []string{e.s.name, e.timeout, e.s.channel, e.s.waiters},
		raw, time.Now().UnixMilli(), NoLeaseScore, e.s.c.PublishArg(ctx)).Int64Slice()
	if err == nil && len(res) == 0 {
		err = fmt.Errorf("%w: lease time replied %v", rlock.ErrUnexpectedReply, res)
	}
	switch {
	case err != nil:
		return 0, e.s.scriptErr("lease time", err)
	case res[0] != 1:
		return 0, fmt.Errorf("%w: permit %s of semaphore %q", rlock.ErrNotHeld, id, e.s.name)
	case len(res) < 2:
		return 0, fmt.Errorf("%w: lease time replied %v", rlock.ErrUnexpectedReply, res)
	case res[1] < 0:
		return -1, nil
	}
	return time.Duration(res[1]) * time.Millisecond, nil
}

// DrainPermits returns expired permits to the pool, then takes every
// available permit and returns how many it took (0 when none were
// available; a count below zero is left as it is). The permits taken
// have no IDs: give them back with AddPermits. Applied exactly once; a
// copy re-sent after a lost reply changes nothing, and the call then
// reports 0 (the permits are taken all the same). Errors, and what a
// drain no replica acknowledged does, are as Semaphore.DrainPermits'.
func (e *Expirable) DrainPermits(ctx context.Context) (int64, error) {
	if e.s.c.Closed() {
		return 0, rlock.ErrClosed
	}
	id := e.s.c.RequestID()
	pub := e.s.c.PublishArg(detached(ctx))
	var err error
	for range 3 {
		var v int64
		cmd, synced := e.s.c.RunSynced(detached(ctx), lua.ExpDrain, []string{e.s.name, e.timeout, e.s.channel, e.s.ops},
			time.Now().UnixMilli(), pub, id, e.s.c.ReplayWindow())
		v, err = cmd.Int64()
		if err == nil {
			return e.s.drained(ctx, v, synced)
		}
		if isReply(err) {
			return 0, e.s.scriptErr("drain", err)
		}
	}
	return 0, fmt.Errorf("semaphore %q: drain: %w", e.s.name, err)
}

// TrySetPermits sets the available permits to n if the semaphore has no
// counter yet, as Semaphore.TrySetPermits does.
func (e *Expirable) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return e.s.TrySetPermits(ctx, n)
}

// AddPermits adds n available permits (n may be negative), as
// Semaphore.AddPermits does.
func (e *Expirable) AddPermits(ctx context.Context, n int) error { return e.s.AddPermits(ctx, n) }

// Permit is one held permit of an Expirable. Its methods are safe for
// concurrent use.
type Permit struct {
	e     *Expirable
	raw   []byte
	id    string
	lease time.Duration // 0: renewed by the client's watchdog

	mu     sync.Mutex
	until  time.Time      // with an explicit lease
	wd     *renewal.Lease // the watchdog's registration; nil with an explicit lease
	err    error          // the loss, once lost
	ended  bool
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // fires at until (explicit lease)
	unlife func() bool // stops the client-close watch
}

func newPermit(e *Expirable, raw []byte, id string, lease time.Duration, sent time.Time) *Permit {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &Permit{e: e, raw: raw, id: id, lease: lease, done: make(chan struct{}), ctx: ctx, cancel: cancel}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := e.s.c
	if lease > 0 {
		p.until = sent.Add(lease)
		p.timer = time.AfterFunc(time.Until(p.until), p.checkExpiry)
	} else {
		p.wd = c.Watchdog().Add(e.timeout, string(raw), sent, func(err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.wd != nil { // the registration ended with this report
				p.until, p.wd = p.wd.Until(), nil
				p.endLocked(fmt.Errorf("permit %s of semaphore %q: %w", p.id, p.e.s.name, err))
			}
		})
	}
	p.unlife = context.AfterFunc(c.Life(), func() { p.lose("the client closed") })
	return p
}

// ID returns the permit's ID, 32 lowercase hex characters (the raw 16
// bytes are the member of "{name}:timeout", as Redisson stores them).
func (p *Permit) ID() string { return p.id }

// Until returns the time up to which the permit is known to be held: the
// end of its lease as sent, moved on by every renewal and SetLease. After
// Release or a loss it no longer moves.
func (p *Permit) Until() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wd != nil {
		return p.wd.Until()
	}
	return p.until
}

// Done is closed when the permit stops being held: released, or lost.
func (p *Permit) Done() <-chan struct{} { return p.done }

// Err returns nil while the permit is held or after Release, and an
// error wrapping rlock.ErrLockLost once it was lost: its lease passed, a
// renewal found it gone, or the client closed while holding it.
func (p *Permit) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Ctx returns a context that ends when Done closes, its cause the loss
// (see Err) or context.Canceled after Release.
func (p *Permit) Ctx() context.Context { return p.ctx }

// end ends the holding: with loss nil after a release.
func (p *Permit) endLocked(loss error) {
	if p.ended {
		return
	}
	p.ended = true
	p.err = loss
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.wd != nil {
		p.until = p.wd.Until()
		p.wd.Stop()
		p.wd = nil
	}
	if p.unlife != nil {
		p.unlife()
	}
	close(p.done)
	if loss != nil {
		p.cancel(loss)
	} else {
		p.cancel(context.Canceled)
	}
}

func (p *Permit) lose(cause string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked(fmt.Errorf("%w: permit %s of semaphore %q: %s", rlock.ErrLockLost, p.id, p.e.s.name, cause))
}

// checkExpiry runs at the end of an explicit lease: lost unless SetLease
// moved the end on.
func (p *Permit) checkExpiry() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if d := time.Until(p.until); d > 0 {
		p.timer.Reset(d)
		return
	}
	p.endLocked(fmt.Errorf("%w: permit %s of semaphore %q: its lease passed", rlock.ErrLockLost, p.id, p.e.s.name))
}

// Release returns the permit to the pool and ends its holding (Done
// closes, Err stays nil). It returns rlock.ErrNotHeld when the permit was
// no longer held (lost, or released already; Err then says why), or the
// Redis client's error (the holding still ends: the renewal stops, and
// the permit returns at its lease's end if the release did not run).
// Applied once under re-sends.
func (p *Permit) Release(ctx context.Context) error {
	p.mu.Lock()
	if p.ended {
		err := p.err
		p.mu.Unlock()
		if err == nil {
			err = errors.New("released already")
		}
		return fmt.Errorf("%w: permit %s of semaphore %q: %w", rlock.ErrNotHeld, p.id, p.e.s.name, err)
	}
	p.endLocked(nil)
	p.mu.Unlock()
	ok, err := p.e.release(ctx, p.raw, p.id, false)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: permit %s of semaphore %q: its lease had passed", rlock.ErrNotHeld, p.id, p.e.s.name)
	}
	return nil
}

// SetLease gives the permit a lease of d from now (ending watchdog
// renewal if it had none), and reports rlock.ErrNotHeld when it is no
// longer held (the handle then reports the loss). d must be at least
// 1 ms.
func (p *Permit) SetLease(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: lease %v is less than 1ms", rlock.ErrInvalidArgument, d)
	}
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return fmt.Errorf("%w: permit %s of semaphore %q", rlock.ErrNotHeld, p.id, p.e.s.name)
	}
	wd := p.wd
	p.mu.Unlock()
	if wd != nil {
		// No renewal in flight may set the watchdog's lease over this one.
		wd.StopAndWait()
	}
	sent := time.Now()
	ok, err := p.e.update(ctx, p.raw, sent.Add(d), sent)
	if err != nil {
		if wd != nil { // renewal stopped: held as long as its last renewal says
			p.mu.Lock()
			if !p.ended && p.wd == wd {
				p.until, p.wd, p.lease = wd.Until(), nil, d
				p.timer = time.AfterFunc(time.Until(p.until), p.checkExpiry)
			}
			p.mu.Unlock()
		}
		return err
	}
	if !ok {
		p.lose("gone when its lease was set")
		return fmt.Errorf("%w: permit %s of semaphore %q", rlock.ErrNotHeld, p.id, p.e.s.name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	p.until = sent.Add(d)
	if p.wd != nil { // from watchdog renewal to an explicit lease
		p.lease = d
		p.wd = nil
		p.timer = time.AfterFunc(time.Until(p.until), p.checkExpiry)
	} else {
		p.timer.Reset(time.Until(p.until))
	}
	return nil
}
