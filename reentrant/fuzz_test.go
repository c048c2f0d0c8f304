package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
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
		c, err := reentrant.NewClient(rdb, reentrant.WithClientID(id),
			reentrant.WithReplayWindow(time.Duration(replay)), reentrant.WithMaxPoll(time.Duration(maxPoll)))
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
	f.Add(strings.Repeat("n", rlock.MaxNameLen+1), int64(1<<63-1))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	f.Cleanup(func() { _ = rdb.Close() })
	c, err := reentrant.NewClient(rdb)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	f.Fuzz(func(t *testing.T, name string, lease int64) {
		l, err := reentrant.New(c, name, reentrant.WithLease(time.Duration(lease)))
		valid := rlock.ValidateName(name) == nil && time.Duration(lease) >= time.Millisecond
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
	newClient := func(id string) *reentrant.Client {
		c, err := reentrant.NewClient(rdb, reentrant.WithClientID(id))
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
		newLock := func(c *reentrant.Client) *reentrant.Lock {
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
					what, err = "TryLock (lost)", l.TryLock(o.ctx)
				case 1:
					what, err = "Lock (lost)", l.Lock(o.ctx)
				case 2:
					what, err = "Unlock (lost)", l.Unlock(o.ctx)
				}
				want := rlock.ErrLockLost
				if op == 2 {
					want = rlock.ErrNotHeld
				}
				if !errors.Is(err, want) {
					t.Fatalf("step %d: owner %d %s = %v, want %v", step, i, what, err, want)
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
				err = l.TryLock(o.ctx)
				if free || mine {
					if err != nil {
						t.Fatalf("step %d: owner %d %s = %v; model: holder %d x%d", step, i, what, err, holder, count)
					}
					holder, count = i, count+1
				} else if !errors.Is(err, rlock.ErrNotObtained) {
					t.Fatalf("step %d: owner %d %s = %v, want ErrNotObtained", step, i, what, err)
				}
			case 1: // Lock: only when it cannot block; else a Lock that times out
				what = "Lock"
				if free || mine {
					if err = o.l.Lock(o.ctx); err != nil {
						t.Fatalf("step %d: owner %d Lock = %v", step, i, err)
					}
					holder, count = i, count+1
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
