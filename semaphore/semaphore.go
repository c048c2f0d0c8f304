package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
)

// DefaultPoll is the longest a blocked Acquire waits between two attempts
// when no message wakes it, unless WithPoll says otherwise: a lost
// release message costs a waiter at most this.
const DefaultPoll = time.Second

// Semaphore is a handle on one counting semaphore, Redisson's RSemaphore:
// the key named by the semaphore holds the available permits as a decimal
// integer (a missing key is 0 permits), and releases publish the new count
// on the channel "redisson_sc:{name}". Create it with New; it is cheap,
// does no I/O, and is safe for concurrent use. Permits have no owner:
// anyone may release them (see the package doc).
type Semaphore struct {
	c       *core.Client
	name    string
	channel string
	ops     string
	waiters string // the registry of waiting clients (see sem_common.lua)
	desig   string // this client's designation message
	poll    time.Duration
}

// Option configures a Semaphore. A nil Option is ignored.
type Option func(*config) error

type config struct {
	poll time.Duration
}

// WithPoll sets the longest a blocked Acquire waits between two attempts
// when no message wakes it. Default DefaultPoll (1 s). d must be at least
// 1 ms.
func WithPoll(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: poll %v is less than 1ms", rlock.ErrInvalidArgument, d)
		}
		c.poll = d
		return nil
	}
}

// New returns a handle on the counting semaphore name of client. It does
// no I/O: the semaphore exists in Redis once permits are set or released
// (see TrySetPermits, AddPermits, Release). It reports ErrInvalidArgument
// for a nil client, a bad name (empty, longer than 1024 bytes, or with a
// brace but no hash tag) or a bad option.
func New(client *rlock.Client, name string, opts ...Option) (*Semaphore, error) {
	c, ok := core.Of(client)
	if !ok {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	if err := base.ValidateName(name); err != nil {
		return nil, err
	}
	cfg := config{poll: DefaultPoll}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Semaphore{
		c:       c,
		name:    name,
		channel: base.DerivedKey(ChannelPrefix, name),
		ops:     suffixed(name, "rlock_ops"),
		waiters: base.SemaphoreWaiters(name),
		desig:   c.CountingDesignation(),
		poll:    cfg.poll,
	}, nil
}

// ChannelPrefix is the prefix of a semaphore's channel, as Redisson names
// it: "redisson_sc:{name}", or "redisson_sc:name" for a name with a hash
// tag.
const ChannelPrefix = base.SemaphoreChannelPrefix

// suffixed is Redisson's suffixName: "{name}:s", or "name:s" for a name
// with a hash tag; either way in name's hash slot.
func suffixed(name, s string) string { return base.Suffixed(name, s) }

// Name returns the semaphore's name, the key of its counter.
func (s *Semaphore) Name() string { return s.name }

// checkN reports ErrInvalidArgument for a permit count that is not
// positive.
func checkN(what string, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: %s of %d permits: the count must be positive", rlock.ErrInvalidArgument, what, n)
	}
	return nil
}

// Acquire takes n permits, waiting until that many are available. A
// release (by any client, Go or Redisson) wakes it through the client's
// shared pub/sub hub; it also tries again at least every poll interval
// (WithPoll), so a lost message delays it by at most that. It returns nil
// once it holds the permits; ctx's error when ctx ends first (a grant that
// raced with the end of ctx is given back, so the caller holds nothing);
// rlock.ErrClosed when the client closes; rlock.ErrInvalidArgument for
// n <= 0; rlock.ErrWrongType when the key holds something else; an error
// wrapping rlock.ErrUnreachable when Redis has not answered for the
// client's unreachable timeout (rlock.WithUnreachableTimeout): failures to
// reach it are ridden through until then, as a waiting Lock does (an
// attempt that failed is undone first if it ran, see the package doc); or
// any other error of the Redis client. A grant that no replica
// acknowledged (replica sync, see the package doc) is given back and
// tried again after a pause.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	if err := checkN("acquire", n); err != nil {
		return err
	}
	if s.c.Closed() {
		return rlock.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wc, err := s.enterWaiting(ctx)
	if err != nil {
		return err
	}
	defer wc.exit()
	var failed core.Outlive
	ok, _, err := s.attempt(ctx, n, waiting{register: true})
	pause, err := s.c.Outlive(&failed, s.name, err)
	if err != nil || ok {
		return err
	}
	wc.refused()
	w, joined := s.c.Hub().JoinCounting(s.channel, s.passOn)
	if !joined {
		return rlock.ErrClosed
	}
	defer w.Leave()
	timer := time.NewTimer(s.wait(pause))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.c.Closing():
			return rlock.ErrClosed
		case <-w.C:
		case <-timer.C:
		}
		last := wc.alone()
		ok, left, err := s.attempt(ctx, n, waiting{register: true, last: last})
		pause, err := s.c.Outlive(&failed, s.name, err)
		if err != nil {
			return err
		}
		if ok {
			if last {
				wc.grantedLast()
			}
			if left > 0 {
				w.WakeNext() // more permits for the next waiter of this client
			}
			return nil
		}
		wc.refused()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(s.wait(pause))
	}
}

// wait is how long a waiting acquire sleeps at most: the poll interval,
// or the pause core.Outlive gave after a failed attempt when that is set
// and shorter.
func (s *Semaphore) wait(pause time.Duration) time.Duration {
	if pause > 0 {
		return min(s.poll, pause)
	}
	return s.poll
}

// TryAcquire takes n permits if that many are available now, and reports
// whether it did; it never waits for permits. A grant that raced with the
// end of ctx is given back, and ctx's error returned. A grant that no
// replica acknowledged (replica sync, see the package doc) is given back
// exactly once, and an error wrapping rlock.ErrNotReplicated returned
// with false. Other errors are as Acquire's.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) (bool, error) {
	if err := checkN("acquire", n); err != nil {
		return false, err
	}
	if s.c.Closed() {
		return false, rlock.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ok, _, err := s.attempt(ctx, n, waiting{})
	return ok && err == nil, err
}

// attempt runs the acquire script once under a fresh operation ID, with
// ctx's cancellation removed so that its outcome is always known (the
// Redis client's timeouts bound it). A reply lost in transit (go-redis
// re-sends the script, which finds its ID and does not take twice; or
// gives up) is settled by the cancel script: the permits the attempt may
// have taken are given back and no later copy of it can take any. A grant
// whose ctx ended meanwhile is given back the same way. It returns
// whether the permits are held, and how many are left when they are.
func (s *Semaphore) attempt(ctx context.Context, n int, wt waiting) (bool, int64, error) {
	id := s.c.RequestID()
	desig, last := "", "0"
	if wt.register {
		desig = s.desig
	}
	if wt.last {
		last = "1"
	}
	cmd, synced := s.c.RunSynced(detached(ctx), lua.SemAcquire, []string{s.name, s.ops, s.waiters},
		n, id, s.c.ReplayWindow(), desig, s.live().Milliseconds(), last)
	res, err := cmd.Int64Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("%w: acquire replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		if isReply(err) {
			return false, 0, s.scriptErr("acquire", err)
		}
		if cerr := s.cancel(ctx, id, n); cerr != nil {
			return false, 0, fmt.Errorf("semaphore %q: acquire failed (%w), and giving back what it may have taken failed too: %w", s.name, err, cerr)
		}
		return false, 0, err
	}
	if res[0] != 1 {
		return false, res[1], nil
	}
	if synced.Unsynced() {
		// The grant may be lost on failover: give it back (the cancel
		// script returns the permits once, whatever copies ran).
		why := fmt.Errorf("%w: semaphore %q: %s", rlock.ErrNotReplicated, s.name, synced.Describe(fmt.Sprintf("the acquire of %d permits", n)))
		if cerr := s.cancel(ctx, id, n); cerr != nil {
			return false, 0, fmt.Errorf("%w (and giving the permits back failed: %w)", why, cerr)
		}
		return false, 0, why
	}
	if err := ctx.Err(); err != nil {
		if cerr := s.cancel(ctx, id, n); cerr != nil {
			return false, 0, fmt.Errorf("semaphore %q: %w after a grant; giving it back failed: %w", s.name, err, cerr)
		}
		return false, 0, err
	}
	return true, res[1], nil
}

// waiting says how an acquire attempt registers its client with the
// semaphore's registry of waiting clients, which releases designate (see
// sem_common.lua): register for a call that waits when refused; last when
// the call is its client's only waiter, so that a grant takes the client
// off.
type waiting struct{ register, last bool }

// unregister takes this client off the registry of waiting clients: its
// last waiting call ended (see waitingCall.exit, which runs it in the
// background; Close waits for it). A failure is left to the
// registration's own lapse (the poll plus registrationGrace).
func (s *Semaphore) unregister() {
	ctx, cancel := context.WithTimeout(s.c.Life(), 5*time.Second)
	defer cancel()
	_ = s.c.Run(ctx, lua.SemLeave, []string{s.waiters}, s.desig).Err()
}

// passOn publishes the count again without designations, in the
// background: this client's hub was designated by a release but had no
// waiter left to wake (see waiters.Hub.JoinCounting). A failure leaves the
// other clients' waiters to their polls.
func (s *Semaphore) passOn() {
	s.c.Background(func() {
		ctx, cancel := context.WithTimeout(s.c.Life(), 5*time.Second)
		defer cancel()
		_ = s.c.Run(ctx, lua.SemPass, []string{s.name, s.channel}, s.c.PublishArg(ctx)).Err()
	})
}

// waitingCalls counts, per client and semaphore, the Acquire calls that
// may wait, from before their first attempt to their end, and whether the
// client is registered as waiting: a grant takes the client off the
// registry only when no other such call is under way (even one that has
// not joined the hub yet), and the last call to end takes it off when a
// refusal left it registered. A call that starts while that removal runs
// waits for it, so the removal never follows the call's registration.
var waitingCalls = struct {
	sync.Mutex
	m map[handleKey]*waitingCount
}{m: map[handleKey]*waitingCount{}}

type waitingCount struct {
	n          int
	registered bool
	leaving    chan struct{} // closed when the removal in flight ends
}

// handleKey names a semaphore of a client.
type handleKey struct {
	c    *core.Client
	name string
}

func (s *Semaphore) key() handleKey { return handleKey{s.c, s.name} }

// waitingCall is one counted Acquire call.
type waitingCall struct{ s *Semaphore }

// enterWaiting counts a call that may wait, once no removal of the
// client from the registry is in flight (or ctx ended).
func (s *Semaphore) enterWaiting(ctx context.Context) (waitingCall, error) {
	k := s.key()
	waitingCalls.Lock()
	for {
		c := waitingCalls.m[k]
		if c == nil {
			c = &waitingCount{}
			waitingCalls.m[k] = c
		}
		if c.leaving == nil {
			c.n++
			waitingCalls.Unlock()
			return waitingCall{s}, nil
		}
		leaving := c.leaving
		waitingCalls.Unlock()
		select {
		case <-leaving:
		case <-ctx.Done():
			return waitingCall{}, ctx.Err()
		}
		waitingCalls.Lock()
	}
}

// alone reports whether wc is its client's only waiting call of the
// semaphore.
func (wc waitingCall) alone() bool {
	waitingCalls.Lock()
	defer waitingCalls.Unlock()
	return waitingCalls.m[wc.s.key()].n == 1
}

// refused records that an attempt registered the client; grantedLast
// that a grant took it off.
func (wc waitingCall) refused()     { wc.set(true) }
func (wc waitingCall) grantedLast() { wc.set(false) }

func (wc waitingCall) set(registered bool) {
	waitingCalls.Lock()
	waitingCalls.m[wc.s.key()].registered = registered
	waitingCalls.Unlock()
}

// exit ends wc's count; the client's last waiting call takes the client
// off the registry, in the background, if it is registered: no release
// should designate it.
func (wc waitingCall) exit() {
	k := wc.s.key()
	waitingCalls.Lock()
	defer waitingCalls.Unlock()
	c := waitingCalls.m[k]
	c.n--
	if c.n > 0 {
		return
	}
	if !c.registered {
		delete(waitingCalls.m, k)
		return
	}
	c.registered = false
	leaving := make(chan struct{})
	c.leaving = leaving
	done := func() {
		waitingCalls.Lock()
		defer waitingCalls.Unlock()
		close(leaving)
		c.leaving = nil
		if c.n == 0 && waitingCalls.m[k] == c {
			delete(waitingCalls.m, k)
		}
	}
	if !wc.s.c.Background(func() { defer done(); wc.s.unregister() }) {
		go done() // closing: nothing to take off; done needs the lock held here
	}
}

// registrationGrace is added to the poll in a registration's life: the
// time a waiting call may take beyond its next due attempt before its
// client counts as gone.
const registrationGrace = 2 * time.Second

// live is the life of this client's registration as a waiting client:
// the poll plus registrationGrace.
func (s *Semaphore) live() time.Duration { return s.poll + registrationGrace }

// cancel gives back the permits of acquire operation id if it took them,
// and makes sure no copy of it takes any later.
func (s *Semaphore) cancel(ctx context.Context, id string, n int) error {
	pub := s.c.PublishArg(detached(ctx))
	var err error
	for range 3 {
		err = s.c.Run(detached(ctx), lua.SemCancel, []string{s.name, s.channel, s.ops, s.waiters},
			n, id, s.c.ReplayWindow(), pub).Err()
		if err == nil || isReply(err) {
			return err
		}
	}
	return err
}

// Release returns n permits to the semaphore (by INCRBY, as Redisson does:
// there is no upper bound and no check that the caller took them), and
// wakes waiters on every client with the new count. It is applied exactly
// once: a copy re-sent by the Redis client after a lost reply is
// recognised and ignored, and a call whose reply is lost is retried under
// the same operation ID. ctx's end does not interrupt a release already
// sent (the Redis client's timeouts bound it). It returns
// rlock.ErrInvalidArgument for n <= 0, rlock.ErrWrongType when the key
// holds something else, or the Redis client's error (the permits may then
// or may not have been returned; a retried Release could return them
// twice).
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := checkN("release", n); err != nil {
		return err
	}
	_, err := s.write(ctx, "release", lua.SemRelease, n)
	return err
}

// AddPermits adds n permits, or takes -n away for a negative n (the count
// may then go below zero: acquirers wait until releases bring it back
// above what they ask), and wakes waiters with the new count. Applied
// exactly once, as Release is. n == 0 does nothing and no I/O. Unlike
// Redisson's, it keeps a TTL the key may have. Errors are as Release's.
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	_, err := s.write(ctx, "add permits", lua.SemAdd, n)
	return err
}

// write runs a write script that takes KEYS (counter, channel, operation
// record) and ARGV (n, operation ID, replay window, publish mode), trying
// again under the same operation ID when the reply is lost.
func (s *Semaphore) write(ctx context.Context, what string, script *redis.Script, n int) (*redis.Cmd, error) {
	if s.c.Closed() {
		return nil, rlock.ErrClosed
	}
	id := s.c.RequestID()
	pub := s.c.PublishArg(detached(ctx))
	var cmd *redis.Cmd
	for range 3 {
		cmd = s.c.Run(detached(ctx), script, []string{s.name, s.channel, s.ops, s.waiters}, n, id, s.c.ReplayWindow(), pub)
		if err := cmd.Err(); err == nil {
			return cmd, nil
		} else if isReply(err) {
			return cmd, s.scriptErr(what, err)
		}
	}
	return cmd, fmt.Errorf("semaphore %q: %s: %w", s.name, what, cmd.Err())
}

// TrySetPermits sets the semaphore's permits to n if it has no counter
// yet (Redisson's trySetPermits: a counter of 0 is set), and reports
// whether it did; it wakes waiters when it does. A call whose reply was
// lost and re-sent still reports true. n must not be negative
// (rlock.ErrInvalidArgument). Errors are as Release's.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if n < 0 {
		return false, fmt.Errorf("%w: %d permits: the count must not be negative", rlock.ErrInvalidArgument, n)
	}
	cmd, err := s.write(ctx, "set permits", lua.SemSet, n)
	if err != nil {
		return false, err
	}
	v, err := cmd.Int64()
	if err != nil {
		return false, fmt.Errorf("%w: set permits: %v", rlock.ErrUnexpectedReply, err)
	}
	return v == 1, nil
}

// AvailablePermits returns the permits available now (0 when the
// semaphore has no counter; possibly negative after AddPermits with a
// negative n). It returns rlock.ErrWrongType when the key holds something
// else, or the Redis client's error (also ctx's end).
func (s *Semaphore) AvailablePermits(ctx context.Context) (int64, error) {
	v, err := s.c.Run(ctx, lua.SemGet, []string{s.name}).Int64()
	if err != nil {
		return 0, s.scriptErr("available permits", err)
	}
	return v, nil
}

// DrainPermits takes every available permit and returns how many it took
// (0 when none were available; a count below zero is left as it is).
// Applied exactly once; a copy re-sent after a lost reply leaves the count
// alone, and the call then reports 0 (the permits are taken all the same).
// A drain that no replica acknowledged (replica sync, see the package doc)
// gives the permits back (AddPermits, applied once) and reports 0 with an
// error wrapping rlock.ErrNotReplicated. Other errors are as Release's.
func (s *Semaphore) DrainPermits(ctx context.Context) (int64, error) {
	if s.c.Closed() {
		return 0, rlock.ErrClosed
	}
	id := s.c.RequestID()
	var err error
	for range 3 {
		cmd, synced := s.c.RunSynced(detached(ctx), lua.SemDrain, []string{s.name, s.ops}, id, s.c.ReplayWindow())
		var v int64
		v, err = cmd.Int64()
		if err == nil {
			return s.drained(ctx, v, synced)
		}
		if isReply(err) {
			return 0, s.scriptErr("drain", err)
		}
	}
	return 0, fmt.Errorf("semaphore %q: drain: %w", s.name, err)
}

// drained concludes a drain that took v permits: when no replica is known
// to have it (see RunSynced), it gives the v permits back (AddPermits,
// applied once) and reports rlock.ErrNotReplicated.
func (s *Semaphore) drained(ctx context.Context, v int64, synced core.Synced) (int64, error) {
	if v <= 0 || !synced.Unsynced() {
		return v, nil
	}
	why := fmt.Errorf("%w: semaphore %q: %s", rlock.ErrNotReplicated, s.name, synced.Describe(fmt.Sprintf("the drain of %d permits", v)))
	if _, err := s.write(ctx, "give drained permits back", lua.SemAdd, int(v)); err != nil {
		return 0, fmt.Errorf("%w (and giving the permits back failed: %w)", why, err)
	}
	return 0, why
}

// scriptErr names the semaphore in a script's failure, mapping a key of
// another type to rlock.ErrWrongType.
func (s *Semaphore) scriptErr(what string, err error) error {
	if isReply(err) && strings.Contains(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("%w: semaphore %q: %s: %v", rlock.ErrWrongType, s.name, what, err)
	}
	return fmt.Errorf("semaphore %q: %s: %w", s.name, what, err)
}

// isReply reports whether err is an error reply of Redis (the command ran
// and failed; nothing is unknown about it).
func isReply(err error) bool {
	var r redis.Error
	return err != nil && errors.As(err, &r) && !errors.Is(err, redis.Nil)
}

// detached returns ctx without its cancellation (see attempt).
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}
