package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlock-go/rlock/internal/base"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// Fuzz targets: `go test` runs their seed corpora in CI; fuzz one with
// `go test -run '^$' -fuzz '^FuzzModel$' ./reentrant`.

// FuzzClientOptions: any client ID, replay window and max poll give a
// client or ErrInvalidArgument by the documented rules, with no I/O and no
// panic.
func FuzzClientOptions(f *testing.F) {
	f.Add("app-1", int64(time.Second), int64(time.Second))
	f.Add("", int64(0), int64(-1))
	f.Add("a:b", int64(1), int64(1))
	f.Add(strings.Repeat("x", 128), int64(1<<62), int64(1))
	f.Add(strings.Repeat("x", 129), int64(-1<<63), int64(1<<63-1))
	f.Add("a\nb", int64(time.Millisecond), int64(time.Millisecond))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	f.Cleanup(func() { _ = rdb.Close() })
	f.Fuzz(func(t *testing.T, id string, replay, maxPoll int64) {
		c, err := rlock.NewClient(rdb, rlock.WithClientID(id),
			rlock.WithReplayWindow(time.Duration(replay)), rlock.WithMaxPoll(time.Duration(maxPoll)))
		valid := id != "" && len(id) <= 128 && !strings.ContainsAny(id, ":\x00\r\n") && replay > 0 && maxPoll > 0
		if valid != (err == nil) {
			t.Fatalf("NewClient(%q, replay %d, maxPoll %d) = %v", id, replay, maxPoll, err)
		}
		if err != nil {
			if !errors.Is(err, rlock.ErrInvalidArgument) {
				t.Fatalf("NewClient(%q) = %v, not ErrInvalidArgument", id, err)
			}
			return
		}
		defer c.Close()
		if c.ID() != id {
			t.Fatalf("ID() = %q, want %q", c.ID(), id)
		}
	})
}

// FuzzLockOptions: any name and lease give a handle or ErrInvalidArgument
// by the documented rules, with no I/O and no panic.
func FuzzLockOptions(f *testing.F) {
	f.Add("orders:42", int64(time.Minute))
	f.Add("", int64(time.Minute))
	f.Add("x", int64(time.Millisecond-1))
	f.Add("x", int64(time.Millisecond))
	f.Add("x", int64(-1<<63))
	f.Add(strings.Repeat("n", base.MaxNameLen+1), int64(1<<63-1))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	f.Cleanup(func() { _ = rdb.Close() })
	c, err := rlock.NewClient(rdb)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	f.Fuzz(func(t *testing.T, name string, lease int64) {
		l, err := reentrant.New(c, name, reentrant.WithLease(time.Duration(lease)))
		valid := base.ValidateName(name) == nil && time.Duration(lease) >= time.Millisecond
		if valid != (err == nil) {
			t.Fatalf("New(%q, lease %d) = %v", name, lease, err)
		}
		if err != nil && !errors.Is(err, rlock.ErrInvalidArgument) {
			t.Fatalf("New(%q, lease %d) = %v, not ErrInvalidArgument", name, lease, err)
		}
		if err == nil && l.Name() != name {
			t.Fatalf("Name() = %q, want %q", l.Name(), name)
		}
	})
}

// FuzzModel drives random sequences of lock operations by several owners
// (two explicit owners and the handle's own on one client, an owner with the
// same explicit ID on a second client) against miniredis, and compares
// every reply and every owner's hold count with a Go model of the lock:
// which owner holds it and how many times. Each input byte is one
// operation: the owner is b%4, the operation b/4%6 (TryLock, Lock, Unlock,
// ForceUnlock, a second handle of the same owner re-entering, queries).
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 0, 8, 8, 1, 9, 5, 4, 12, 13})
	f.Add([]byte{4, 4, 4, 1, 5, 8, 8, 8, 9})
	f.Add([]byte{0, 16, 1, 12, 2, 3, 8, 20, 21, 22})
	f.Add([]byte{3, 7, 11, 15, 19, 23, 2, 6, 10, 14, 18, 22})
	f.Add([]byte{0, 0, 12, 0, 8, 8, 8})
	m := miniredis.RunT(f)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	f.Cleanup(func() { _ = rdb.Close() })
	newClient := func(id string) *rlock.Client {
		c, err := rlock.NewClient(rdb, rlock.WithClientID(id))
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := newClient("fuzz-c1"), newClient("fuzz-c2")
	var seq atomic.Uint64
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		ctx := context.Background()
		name := fmt.Sprintf("fuzz-model-%d", seq.Add(1))
		newLock := func(c *rlock.Client) *reentrant.Lock {
			l, err := reentrant.New(c, name, reentrant.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		own := newLock(c1) // its own owner is owner 2
		owners := []struct {
			ctx    context.Context
			l      *reentrant.Lock
			second *reentrant.Lock // another handle, same owner
		}{
			{rlock.WithOwner(ctx, "alice"), newLock(c1), newLock(c1)},
			{rlock.WithOwner(ctx, "bob"), newLock(c1), newLock(c1)},
			{ctx, own, own},
			{rlock.WithOwner(ctx, "alice"), newLock(c2), newLock(c2)}, // not owner 0: another client
		}
		holder, count := -1, 0 // the model
		var stale [4]bool      // holds removed behind the owner's back (ForceUnlock)
		// The handle's own owner (owner 2) passes own's gate: its Locks
		// that succeeded less its Unlocks. While it is above zero, owner 2
		// re-enters with a ctx from its holding, and after a loss it
		// unlocks what it locked (as a deferred Unlock would) before it
		// starts afresh.
		gate2 := 0
		check := func(step int, what string) {
			t.Helper()
			for i, o := range owners {
				want := 0
				if i == holder {
					want = count
				}
				n, err := o.l.HoldCount(o.ctx)
				if err != nil || n != want {
					t.Fatalf("step %d (%s): owner %d hold count %d, %v; model: holder %d x%d", step, what, i, n, err, holder, count)
				}
			}
			locked, err := own.IsLocked(ctx)
			if err != nil || locked != (holder >= 0) {
				t.Fatalf("step %d (%s): IsLocked %v, %v; model: holder %d", step, what, locked, err, holder)
			}
		}
		for step, b := range ops {
			i, op := int(b%4), int(b/4%6)
			o := owners[i]
			free, mine := holder < 0, holder == i
			lctx := o.ctx // the ctx of the owner's lock calls
			if i == 2 && gate2 > 0 {
				lctx = own.Ctx() // re-entry through the documented path
			}
			var what string
			var err error
			if stale[i] && op != 3 && op != 5 {
				// The owner's holds were force-unlocked: its next lock
				// operation is told so (a lock: ErrLockLost, never a silent
				// fresh acquisition; an unlock: ErrNotHeld), then it starts
				// afresh.
				stale[i] = false
				l := o.l
				if op == 4 {
					l = o.second
				}
				switch op {
				case 0, 4:
					what, err = "TryLock (lost)", l.TryLock(lctx)
				case 1:
					what, err = "Lock (lost)", l.Lock(lctx)
				case 2:
					what, err = "Unlock (lost)", l.Unlock(o.ctx)
				}
				want := rlock.ErrLockLost
				if op == 2 {
					want = rlock.ErrNotHeld
				}
				// A re-entry with the Ctx of a holding whose loss the
				// handle has heard of already ends with that ctx.
				heard := lctx != o.ctx && lctx.Err() != nil && errors.Is(context.Cause(lctx), rlock.ErrLockLost)
				if !errors.Is(err, want) && (op == 2 || !heard || !errors.Is(err, lctx.Err())) {
					t.Fatalf("step %d: owner %d %s = %v, want %v", step, i, what, err, want)
				}
				if i == 2 {
					if op == 2 {
						gate2--
					}
					for ; gate2 > 0; gate2-- {
						if err := own.Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
							t.Fatalf("step %d: owner 2 Unlock after the loss = %v, want ErrNotHeld", step, err)
						}
					}
				}
				check(step, what)
				continue
			}
			switch op {
			case 0, 4: // TryLock, on the first or the second handle
				what = "TryLock"
				l := o.l
				if op == 4 {
					what, l = "TryLock (second handle)", o.second
				}
				err = l.TryLock(lctx)
				if free || mine {
					if err != nil {
						t.Fatalf("step %d: owner %d %s = %v; model: holder %d x%d", step, i, what, err, holder, count)
					}
					holder, count = i, count+1
					if i == 2 {
						gate2++
					}
				} else if !errors.Is(err, rlock.ErrNotObtained) {
					t.Fatalf("step %d: owner %d %s = %v, want ErrNotObtained", step, i, what, err)
				}
			case 1: // Lock: only when it cannot block; else a Lock that times out
				what = "Lock"
				if free || mine {
					if err = o.l.Lock(lctx); err != nil {
						t.Fatalf("step %d: owner %d Lock = %v", step, i, err)
					}
					holder, count = i, count+1
					if i == 2 {
						gate2++
					}
				} else {
					dctx, cancel := context.WithTimeout(o.ctx, time.Millisecond)
					err = o.l.Lock(dctx)
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rlock.ErrNotObtained) {
						t.Fatalf("step %d: owner %d Lock on a held lock = %v, want DeadlineExceeded", step, i, err)
					}
				}
			case 2: // Unlock
				what = "Unlock"
				err = o.l.Unlock(o.ctx)
				if i == 2 && gate2 > 0 {
					gate2--
				}
				if mine {
					if err != nil {
						t.Fatalf("step %d: owner %d Unlock = %v", step, i, err)
					}
					if count--; count == 0 {
						holder = -1
					}
				} else if !errors.Is(err, rlock.ErrNotHeld) {
					t.Fatalf("step %d: owner %d Unlock = %v, want ErrNotHeld", step, i, err)
				}
			case 3: // ForceUnlock
				what = "ForceUnlock"
				ok, err := o.l.ForceUnlock(o.ctx)
				if err != nil || ok == free {
					t.Fatalf("step %d: ForceUnlock = %v, %v; model: holder %d", step, ok, err, holder)
				}
				if holder >= 0 {
					stale[holder] = true
				}
				holder, count = -1, 0
			case 5: // queries
				what = "queries"
				held, err := o.second.IsHeld(o.ctx)
				if err != nil || held != mine {
					t.Fatalf("step %d: owner %d IsHeld = %v, %v; model: holder %d", step, i, held, err, holder)
				}
				ttl, err := o.l.TTL(o.ctx)
				if err != nil || (ttl > 0) != !free || ttl > time.Minute {
					t.Fatalf("step %d: TTL = %v, %v; model: holder %d", step, ttl, err, holder)
				}
			}
			check(step, what)
		}
		// Leave nothing behind for the next input.
		if _, err := own.ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzModelFaults is FuzzModel with the faults that leave an outcome
// unknown, each followed by more, different operations of the same owner:
// a call whose reply is lost after the server ran it (go-redis retries
// off, or every retry's reply lost too), a ForceUnlock whose reply is lost
// and which go-redis re-sends after another owner took the lock, explicit
// leases on re-entries of a watchdog hold and MultiLocks over a member the
// owner holds, with time passing (miniredis' clock) between operations.
//
// The model is honest about unknown outcomes: a call that failed may or
// may not have taken effect, and the hold counts read after it (every
// step reads every owner's) pin down which; from then on every reply and
// count must follow exactly. A ForceUnlock takes effect when it first
// reaches the server: its re-send must not act again, and its reply is
// what that first run did.
//
// Each input byte b is one step: the owner is b%3 (alice and bob on a
// client whose go-redis retries are off, alice on a second client that
// retries once), the operation b/3%11 (see the fzOp constants).
func FuzzModelFaults(f *testing.F) {
	b := func(op fzOp, owner int) byte { return byte(int(op)*3 + owner) }
	// Lock twice, Unlock with its reply lost, Unlock: the lock must be free.
	f.Add([]byte{b(fzLock, 0), b(fzLock, 0), b(fzUnlockLost, 0), b(fzUnlock, 0), b(fzTryLock, 1)})
	// The same with go-redis retrying once and losing that reply too.
	f.Add([]byte{b(fzLock, 2), b(fzLock, 2), b(fzUnlockLost, 2), b(fzUnlock, 2), b(fzTryLock, 1)})
	// A re-entry whose reply was lost, then another re-entry.
	f.Add([]byte{b(fzLock, 0), b(fzTryLockLost, 0), b(fzTryLock, 0), b(fzUnlock, 0), b(fzUnlock, 0), b(fzUnlock, 0)})
	// A first acquisition whose reply was lost (retries exhausted), then a re-entry.
	f.Add([]byte{b(fzLockLost, 2), b(fzLock, 2), b(fzUnlock, 2), b(fzUnlock, 2), b(fzTryLock, 0)})
	// ForceUnlock of a free lock, re-sent after bob took it.
	f.Add([]byte{b(fzForceUnlock, 1), b(fzUnlock, 1)})
	// ForceUnlock of a held lock, re-sent after bob took it.
	f.Add([]byte{b(fzLock, 0), b(fzForceUnlock, 1), b(fzTryLock, 0), b(fzUnlock, 1)})
	// An explicit lease on a re-entry of a watchdog hold, then time passes.
	f.Add([]byte{b(fzLock, 0), b(fzLockLease, 0), b(fzTime, 0), b(fzTryLock, 1), b(fzUnlock, 0), b(fzUnlock, 0)})
	// A MultiLock with a lease over a member the owner holds, then time passes.
	f.Add([]byte{b(fzLock, 1), b(fzMulti, 1), b(fzTime, 1), b(fzTryLock, 0), b(fzUnlock, 1)})
	// Explicit leases that do run out, and a MultiLock on a free lock.
	f.Add([]byte{b(fzLockLease, 0), b(fzLockLease, 0), b(fzTime, 0), b(fzTryLock, 1), b(fzUnlock, 0), b(fzMulti, 2), b(fzQueries, 2)})
	f.Add([]byte{b(fzTryLock, 2), b(fzUnlockLost, 2), b(fzTryLockLost, 0), b(fzTryLock, 0), b(fzQueries, 0), b(fzUnlock, 0)})

	fx := newFaultFixture(f)
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		r := fx.newRun(t)
		for step, b := range ops {
			r.step(step, b)
		}
		r.cleanup()
	})
}

// fzOp is an operation of FuzzModelFaults.
type fzOp int

const (
	fzTryLock     fzOp = iota // TryLock
	fzLock                    // Lock, or TryLock where Lock would block
	fzUnlock                  // Unlock
	fzTryLockLost             // TryLock whose reply is lost after it ran
	fzLockLost                // Lock (or TryLock) whose reply is lost
	fzUnlockLost              // Unlock whose reply is lost
	fzLockLease               // LockLease(fzLease) (TryLockLease if another owner holds it)
	fzTime                    // fzTick passes on the server's clock
	fzForceUnlock             // ForceUnlock, reply lost, re-sent after the owner's TryLock
	fzMulti                   // a MultiLock WithLease(fzLease) over the lock and a free one: TryLock, Unlock
	fzQueries                 // IsHeld, TTL
	fzOps
)

const (
	fzLease = 200 * time.Millisecond // every explicit lease
	fzTick  = 300 * time.Millisecond // outlasts fzLease; 64 of them stay well under the watchdog lease
)

// fzLeaseKind is what keeps a hold: the watchdog (it does not expire
// within a run), an explicit lease (it runs out at the next fzTime), or
// either (a watchdog-mode re-entry of an explicit-lease hold, which the
// model does not decide).
type fzLeaseKind int

const (
	fzWatchdog fzLeaseKind = iota
	fzExplicit
	fzEither
)

// fzState is the model: who holds the lock, how many times, kept how.
type fzState struct {
	holder, count int // holder -1: free
	lease         fzLeaseKind
}

// acquire is an acquisition by owner i asking for lease.
func (s fzState) acquire(i int, lease fzLeaseKind) (fzState, bool) {
	switch {
	case s.holder < 0:
		return fzState{holder: i, count: 1, lease: lease}, true
	case s.holder != i:
		return s, false
	}
	next := fzState{holder: i, count: s.count + 1, lease: s.lease}
	// A re-entry never takes the watchdog's protection away from a hold;
	// whether a watchdog-mode re-entry protects an explicit-lease hold is
	// left open.
	if s.lease == fzExplicit && lease == fzWatchdog {
		next.lease = fzEither
	}
	return next, true
}

func (s fzState) release(i int) (fzState, bool) {
	if s.holder != i {
		return s, false
	}
	if s.count == 1 {
		return fzState{holder: -1}, true
	}
	return fzState{holder: i, count: s.count - 1, lease: s.lease}, true
}

func (s fzState) countOf(i int) int {
	if s.holder == i {
		return s.count
	}
	return 0
}

// fzStale is what an owner will hear at its next call after its holds
// were removed behind its back (ForceUnlock, an explicit lease run out):
// nothing (fzFresh), ErrLockLost or ErrNotHeld for sure (fzTold), or
// either that or a fresh start (fzMaybe: its client may not have known it
// held the lock, after a call with an unknown outcome, or may have
// forgotten a hold whose lease ran out).
type fzStale int

const (
	fzFresh fzStale = iota
	fzTold
	fzMaybe
)

// fzCandidate is a state the lock may be in after a call with an unknown
// outcome, and the owner whose holds it removed behind its back (-1:
// none).
type fzCandidate struct {
	s     fzState
	stale int
}

// faultFixture is what every input of FuzzModelFaults shares: miniredis,
// a proxy that loses replies in front of it for the owners' clients, and
// another for the client that force-unlocks, whose go-redis re-sends are
// held back by a dial gate.
type faultFixture struct {
	m              *miniredis.Miniredis
	proxy, fproxy  *redistest.Proxy
	off, one, forc *rlock.Client
	fping          func() error
	gate           *dialGate
	seq            atomic.Uint64
}

func newFaultFixture(f *testing.F) *faultFixture {
	fx := &faultFixture{m: miniredis.RunT(f), gate: &dialGate{}}
	fx.proxy = redistest.NewProxy(f, fx.m.Addr())
	fx.fproxy = redistest.NewProxy(f, fx.m.Addr())
	newRDB := func(p *redistest.Proxy, o *redis.Options) *redis.Client {
		o.Addr = p.Addr()
		rdb := redis.NewClient(o)
		f.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	newClient := func(rdb *redis.Client, id string) *rlock.Client {
		c, err := rlock.NewClient(rdb, rlock.WithClientID(id))
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = c.Close() })
		return c
	}
	fx.off = newClient(newRDB(fx.proxy, &redis.Options{MaxRetries: -1}), "fuzz-off")
	fx.one = newClient(newRDB(fx.proxy, &redis.Options{MaxRetries: 1}), "fuzz-one")
	// One connection, so that go-redis' re-send after the lost reply
	// dials, and the gate can hold it.
	frdb := newRDB(fx.fproxy, &redis.Options{MaxRetries: 3, PoolSize: 1})
	frdb.AddHook(fx.gate)
	fx.forc = newClient(frdb, "fuzz-force")
	fx.fping = func() error { return frdb.Ping(context.Background()).Err() }
	// Every script cached, so that a lost reply is never a NOSCRIPT's.
	direct := redis.NewClient(&redis.Options{Addr: fx.m.Addr()})
	defer direct.Close()
	for _, s := range lua.All() {
		if err := s.Load(context.Background(), direct).Err(); err != nil {
			f.Fatal(err)
		}
	}
	return fx
}

// dialGate is a go-redis hook that, when armed, holds the next dial until
// released: a command re-sent after a lost reply needs a new connection.
type dialGate struct {
	mu      sync.Mutex
	armed   bool
	blocked chan struct{} // closed when the armed dial waits
	release chan struct{}
}

// arm makes the next dial wait for open, and returns a channel closed when
// it does.
func (g *dialGate) arm() (blocked <-chan struct{}, open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.blocked, g.release = true, make(chan struct{}), make(chan struct{})
	return g.blocked, sync.OnceFunc(func() { close(g.release) })
}

func (g *dialGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.mu.Lock()
		armed, blocked, release := g.armed, g.blocked, g.release
		g.armed = false
		g.mu.Unlock()
		if armed {
			close(blocked)
			<-release
		}
		return next(ctx, network, addr)
	}
}

func (g *dialGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (g *dialGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// fzOwner is one owner of a run and its handles.
type fzOwner struct {
	ctx     context.Context
	l, side *reentrant.Lock // the lock; a lock only fzMulti takes
	drops   int             // lost replies that exhaust its client's retries
}

// fzRun is one input in progress.
type fzRun struct {
	t      *testing.T
	fx     *faultFixture
	name   string
	owners []fzOwner
	forcer *reentrant.Lock
	own    *reentrant.Lock // for queries

	s      fzState
	stale  [3]fzStale
	unsure [3]bool       // the owner's last call had an unknown outcome
	cands  []fzCandidate // after such a call: pinned by the next check
	log    []string
}

func (fx *faultFixture) newRun(t *testing.T) *fzRun {
	name := fmt.Sprintf("fuzz-faults-%d", fx.seq.Add(1))
	lock := func(c *rlock.Client, name string) *reentrant.Lock {
		l, err := reentrant.New(c, name)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	r := &fzRun{t: t, fx: fx, name: name, s: fzState{holder: -1},
		forcer: lock(fx.forc, name), own: lock(fx.off, name)}
	ctx := context.Background()
	for i, c := range []*rlock.Client{fx.off, fx.off, fx.one} {
		id := []string{"alice", "bob", "alice"}[i]
		r.owners = append(r.owners, fzOwner{ctx: rlock.WithOwner(ctx, id),
			l: lock(c, name), side: lock(c, name+":side"), drops: []int{1, 1, 2}[i]})
	}
	return r
}

func (r *fzRun) fatalf(step int, format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: %s\nmodel: %+v, stale %v, unsure %v\nsteps:\n  %s", step, fmt.Sprintf(format, args...),
		r.s, r.stale, r.unsure, strings.Join(r.log, "\n  "))
}

func (r *fzRun) step(step int, b byte) {
	i, op := int(b%3), fzOp(int(b/3)%int(fzOps))
	switch op {
	case fzTime:
		r.timePasses()
	case fzForceUnlock:
		r.forceUnlock(step, i)
	case fzQueries:
		r.queries(step, i)
	default:
		r.ownerOp(step, i, op)
	}
	r.check(step)
}

// ownerOp runs an operation of owner i on the lock.
func (r *fzRun) ownerOp(step, i int, op fzOp) {
	o := r.owners[i]
	if r.stale[i] != fzFresh {
		r.staleOp(step, i, op)
		return
	}
	_, ok := r.s.acquire(i, fzWatchdog) // the lock is free or i's
	switch op {
	case fzTryLock:
		r.acquired(step, i, "TryLock", o.l.TryLock(o.ctx), fzWatchdog, false)
	case fzLock:
		if !ok {
			r.acquired(step, i, "TryLock (Lock would wait)", o.l.TryLock(o.ctx), fzWatchdog, false)
			return
		}
		r.acquired(step, i, "Lock", o.l.Lock(o.ctx), fzWatchdog, false)
	case fzTryLockLost:
		r.acquired(step, i, "TryLock, reply lost", r.lose(o, func() error { return o.l.TryLock(o.ctx) }), fzWatchdog, true)
	case fzLockLost:
		if !ok {
			r.acquired(step, i, "TryLock, reply lost", r.lose(o, func() error { return o.l.TryLock(o.ctx) }), fzWatchdog, true)
			return
		}
		r.acquired(step, i, "Lock, reply lost", r.lose(o, func() error { return o.l.Lock(o.ctx) }), fzWatchdog, true)
	case fzUnlock:
		r.released(step, i, "Unlock", o.l.Unlock(o.ctx), false)
	case fzUnlockLost:
		r.released(step, i, "Unlock, reply lost", r.lose(o, func() error { return o.l.Unlock(o.ctx) }), true)
	case fzLockLease:
		if !ok {
			r.acquired(step, i, "TryLockLease", o.l.TryLockLease(o.ctx, fzLease), fzExplicit, false)
			return
		}
		r.acquired(step, i, "LockLease", o.l.LockLease(o.ctx, fzLease), fzExplicit, false)
	case fzMulti:
		r.multi(step, i, ok)
	}
}

// lose runs fn with the reply of its next script lost after the server
// ran it, as many times as o's client would retry it.
func (r *fzRun) lose(o fzOwner, fn func() error) error {
	r.fx.proxy.DropReplies("evalsha", o.drops)
	defer r.fx.proxy.DropReplies("", 0)
	return fn()
}

// acquired checks an acquisition's result against the model and applies
// it. An error other than ErrNotObtained is legal only for a call whose
// reply was lost (unknown): it may or may not have taken effect.
func (r *fzRun) acquired(step, i int, what string, err error, lease fzLeaseKind, unknown bool) {
	r.log = append(r.log, fmt.Sprintf("%d: owner %d %s -> %v", step, i, what, err))
	next, ok := r.s.acquire(i, lease)
	switch {
	case err == nil:
		if !ok {
			r.fatalf(step, "owner %d %s succeeded while owner %d holds the lock", i, what, r.s.holder)
		}
		r.s, r.unsure[i] = next, false
	case errors.Is(err, rlock.ErrNotObtained):
		if ok {
			r.fatalf(step, "owner %d %s = %v; the lock is free or its own", i, what, err)
		}
	case unknown && !errors.Is(err, rlock.ErrLockLost):
		r.cands = []fzCandidate{{r.s, -1}}
		if r.s.holder < 0 {
			// A hold its client may not know of: whether anything renews
			// it is left open.
			next.lease = fzEither
		}
		if ok {
			r.cands = append(r.cands, fzCandidate{next, -1})
			r.unsure[i] = true
		}
	default:
		r.fatalf(step, "owner %d %s = %v", i, what, err)
	}
}

// released is acquired for a release.
func (r *fzRun) released(step, i int, what string, err error, unknown bool) {
	r.log = append(r.log, fmt.Sprintf("%d: owner %d %s -> %v", step, i, what, err))
	next, ok := r.s.release(i)
	switch {
	case err == nil:
		if !ok {
			r.fatalf(step, "owner %d %s succeeded; it holds nothing", i, what)
		}
		r.s, r.unsure[i] = next, false
	case errors.Is(err, rlock.ErrNotHeld):
		if ok {
			r.fatalf(step, "owner %d %s = %v; it holds the lock", i, what, err)
		}
	case unknown:
		r.cands = []fzCandidate{{r.s, -1}}
		if ok {
			r.cands = append(r.cands, fzCandidate{next, -1})
			r.unsure[i] = true
		}
	default:
		r.fatalf(step, "owner %d %s = %v", i, what, err)
	}
}

// staleOp is owner i's first call after its holds were removed behind its
// back: it is told (ErrLockLost from a lock call, ErrNotHeld from an
// unlock), never given a silent fresh acquisition; then it starts afresh.
// If its holding period had ended by the time the call returned (the
// watchdog found the holds gone first), it was told already, and the call
// is a fresh start.
func (r *fzRun) staleOp(step, i int, op fzOp) {
	o := r.owners[i]
	maybe := r.stale[i] == fzMaybe
	r.stale[i] = fzFresh
	done := o.l.Done()
	if op == fzUnlock || op == fzUnlockLost {
		err := o.l.Unlock(o.ctx)
		if errors.Is(err, rlock.ErrNotHeld) {
			r.log = append(r.log, fmt.Sprintf("%d: owner %d Unlock (holds gone) -> %v", step, i, err))
			return
		}
		if !maybe && !isClosed(done) {
			r.fatalf(step, "owner %d Unlock after its holds were removed = %v, want ErrNotHeld", i, err)
		}
		r.released(step, i, "Unlock (holds gone, told before)", err, false)
		return
	}
	err := o.l.TryLock(o.ctx)
	if errors.Is(err, rlock.ErrLockLost) {
		r.log = append(r.log, fmt.Sprintf("%d: owner %d TryLock (holds gone) -> %v", step, i, err))
		return
	}
	if !maybe && !isClosed(done) {
		r.fatalf(step, "owner %d TryLock after its holds were removed = %v, want ErrLockLost", i, err)
	}
	r.acquired(step, i, "TryLock (holds gone, told before)", err, fzWatchdog, false)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// removed records that the holder's holds were removed behind its back:
// it must be told at its next call if sure (a force unlock of a hold its
// client knows of); otherwise it may be told or start afresh.
func (r *fzRun) removed(sure bool) {
	if h := r.s.holder; h >= 0 {
		r.stale[h] = fzTold
		if r.unsure[h] || !sure {
			r.stale[h] = fzMaybe
		}
	}
	r.s = fzState{holder: -1}
}

// timePasses moves the server's clock past every explicit lease.
func (r *fzRun) timePasses() {
	r.fx.m.FastForward(fzTick)
	r.log = append(r.log, fmt.Sprintf("%v passes", fzTick))
	switch r.s.lease {
	case fzExplicit:
		// Whether the client still knows of a hold whose lease ran out
		// is left open.
		r.removed(false)
	case fzEither:
		r.cands = []fzCandidate{{r.s, -1}, {fzState{holder: -1}, r.s.holder}}
	}
}

// forceUnlock force-unlocks the lock through a client whose reply is lost
// after the script ran; go-redis re-sends the script after owner i has
// tried to take the lock. The re-send must not act again: its reply is
// what the first run did, and owner i keeps what it took.
func (r *fzRun) forceUnlock(step, i int) {
	if err := r.fx.fping(); err != nil { // an idle connection for the first send
		r.t.Fatal(err)
	}
	r.fx.fproxy.DropNextReply("evalsha")
	defer r.fx.fproxy.DropReplies("", 0)
	blocked, open := r.fx.gate.arm()
	defer open()
	type result struct {
		ok  bool
		err error
	}
	res := make(chan result, 1)
	go func() {
		ok, err := r.forcer.ForceUnlock(context.Background())
		res <- result{ok, err}
	}()
	select {
	case <-blocked: // the first send ran; the re-send waits to dial
	case got := <-res:
		r.fatalf(step, "ForceUnlock returned (%v, %v) before go-redis re-sent it", got.ok, got.err)
	case <-time.After(10 * time.Second):
		r.fatalf(step, "ForceUnlock: no re-send after 10s")
	}
	wasHeld := r.s.holder >= 0
	r.log = append(r.log, fmt.Sprintf("%d: ForceUnlock ran (lock held: %v); its reply was lost", step, wasHeld))
	r.removed(true)
	r.check(step)
	r.ownerOp(step, i, fzTryLock)
	r.check(step)
	open()
	got := <-res
	r.log = append(r.log, fmt.Sprintf("%d: ForceUnlock re-sent -> %v, %v", step, got.ok, got.err))
	if got.err != nil || got.ok != wasHeld {
		r.fatalf(step, "ForceUnlock re-sent after owner %d's TryLock = %v, %v; its first run found the lock held: %v", i, got.ok, got.err, wasHeld)
	}
}

// multi takes and releases a MultiLock with an explicit lease over the
// lock and a free lock, as owner i; ok: the lock is free or i's. It must
// leave i's holds on the lock as they were, and a hold the watchdog
// renewed renewed.
func (r *fzRun) multi(step, i int, ok bool) {
	o := r.owners[i]
	ml, err := multilock.New([]rlock.Locker{o.l, o.side}, multilock.WithLease(fzLease))
	if err != nil {
		r.t.Fatal(err)
	}
	err = ml.TryLock(o.ctx)
	r.log = append(r.log, fmt.Sprintf("%d: owner %d MultiLock(lease %v) TryLock -> %v", step, i, fzLease, err))
	switch {
	case ok && err != nil, !ok && !errors.Is(err, rlock.ErrNotObtained):
		r.fatalf(step, "owner %d MultiLock TryLock = %v; model: holder %d", i, err, r.s.holder)
	case ok:
		err = ml.Unlock(o.ctx)
		r.log = append(r.log, fmt.Sprintf("%d: owner %d MultiLock Unlock -> %v", step, i, err))
		if err != nil {
			r.fatalf(step, "owner %d MultiLock Unlock = %v", i, err)
		}
		if r.s.lease == fzExplicit {
			// Taken in watchdog mode while the MultiLock acquires: whether
			// that protects an explicit-lease hold is left open.
			r.s.lease = fzEither
		}
	}
	if locked, err := o.side.IsLocked(o.ctx); err != nil || locked {
		r.fatalf(step, "the MultiLock's other member is left locked: %v, %v", locked, err)
	}
}

func (r *fzRun) queries(step, i int) {
	o := r.owners[i]
	held, err := o.l.IsHeld(o.ctx)
	r.log = append(r.log, fmt.Sprintf("%d: owner %d queries", step, i))
	if r.cands == nil && (err != nil || held != (r.s.holder == i)) {
		r.fatalf(step, "owner %d IsHeld = %v, %v", i, held, err)
	}
	ttl, err := o.l.TTL(o.ctx)
	if err != nil || (ttl > 0) != (r.s.holder >= 0) || ttl > watchdog.DefaultLease {
		r.fatalf(step, "TTL = %v, %v", ttl, err)
	}
}

// check reads every owner's hold count and compares it with the model;
// after a call with an unknown outcome it first picks the outcome the
// counts show.
func (r *fzRun) check(step int) {
	r.t.Helper()
	counts := make([]int, len(r.owners))
	for i, o := range r.owners {
		n, err := o.l.HoldCount(o.ctx)
		if err != nil {
			r.fatalf(step, "owner %d HoldCount: %v", i, err)
		}
		counts[i] = n
	}
	locked, err := r.own.IsLocked(context.Background())
	if err != nil {
		r.fatalf(step, "IsLocked: %v", err)
	}
	matches := func(s fzState) bool {
		for i, n := range counts {
			if s.countOf(i) != n {
				return false
			}
		}
		return locked == (s.holder >= 0)
	}
	if r.cands != nil {
		cands := r.cands
		r.cands = nil
		for _, c := range cands {
			if matches(c.s) {
				r.s = c.s
				for i := range r.unsure {
					r.unsure[i] = r.unsure[i] && i == r.s.holder
				}
				if c.stale >= 0 {
					r.stale[c.stale] = fzMaybe
				}
				r.log = append(r.log, fmt.Sprintf("   read: hold counts %v: model %+v", counts, r.s))
				return
			}
		}
		r.fatalf(step, "hold counts %v, locked %v: no outcome of the last call explains them (candidates %+v)", counts, locked, cands)
	}
	if !matches(r.s) {
		r.fatalf(step, "hold counts %v, locked %v; the model says %+v", counts, locked, r.s)
	}
	if h := r.s.holder; h >= 0 && r.s.lease == fzWatchdog && !r.unsure[h] {
		if err := r.owners[h].l.Err(); err != nil {
			r.fatalf(step, "owner %d holds the lock but its holding period ended: %v", h, err)
		}
	}
}

// cleanup leaves nothing behind for the next input.
func (r *fzRun) cleanup() {
	ctx := context.Background()
	for _, l := range []*reentrant.Lock{r.forcer, r.owners[0].side, r.owners[2].side} {
		if _, err := l.ForceUnlock(ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}
