package reentrant_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// clientAllocs are the most allocations rlock's client may add to an
// uncontended TryLock+Unlock beyond the two script calls themselves
// (go-redis's own allocations and the release's request ID), per mode:
// the call's two ARGV slices; the holding, its context and cancel func;
// and what protects the holding, a watchdog registration or a lease timer,
// with the function that reports its loss. Before the hot path was
// trimmed (issue 30 goal 5) it was 21 in watchdog mode and 19 with a
// lease.
var clientAllocs = map[string]float64{"watchdog": 7, "lease": 8}

// TestUncontendedAllocations pins what rlock's client allocates for an
// uncontended TryLock+Unlock: the allocations of the calls against those
// of a bare go-redis EVALSHA of the same two scripts with the same
// arguments, boxed beforehand but for the release's request ID, measured
// the same way. On redis-server only: miniredis runs in the test's process,
// and its allocations would count too. Over 1,000 runs, an allocation
// per op takes 1,000 in the process: what another test's goroutines
// might allocate meanwhile does not add one.
func TestUncontendedAllocations(t *testing.T) {
	ctx := context.Background()
	be := redistest.Real(t)
	rdb := be.NewClient(t)
	c, err := rlock.NewClient(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	name := redistest.Name(t)
	if err := lua.Lock.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lua.Unlock.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	owner := c.ID() + ":#bare"
	lockKeys := []string{name, base.DerivedKey(base.TokenPrefix, name)}
	unlockKeys := []string{name, base.Channel(name), base.DerivedKey(base.LatchPrefix, name), base.Waiters(name)}
	lockArgs := []any{int64(30000), owner, int64(0), "0"}
	unlockArgs := []any{int64(30000), owner, int64(1), base.UnlockMessage, int64(60000), "c", nil, int64(2)}
	n := uint64(0)
	bare := func() {
		if err := lua.Lock.EvalSha(ctx, rdb, lockKeys, lockArgs...).Err(); err != nil {
			t.Fatal(err)
		}
		n++
		unlockArgs[6] = "~0123456789abcdefghijklm:" + strconv.FormatUint(n, 36) // a request ID, as rlock's
		if err := lua.Unlock.EvalSha(ctx, rdb, unlockKeys, unlockArgs...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	bare()
	floor := testing.AllocsPerRun(1000, bare)

	for _, m := range []struct {
		name string
		opts []reentrant.Option
	}{{"watchdog", nil}, {"lease", []reentrant.Option{reentrant.WithLease(30 * time.Second)}}} {
		t.Run(m.name, func(t *testing.T) {
			l, err := reentrant.New(c, name, m.opts...)
			if err != nil {
				t.Fatal(err)
			}
			cycle := func() {
				if err := l.TryLock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle()
			got := testing.AllocsPerRun(1000, cycle)
			t.Logf("TryLock+Unlock: %v allocations, the bare script calls %v", got, floor)
			if extra := got - floor; extra > clientAllocs[m.name] {
				t.Errorf("rlock's client allocates %v times per TryLock+Unlock beyond the bare script calls; want at most %v", extra, clientAllocs[m.name])
			}
		})
	}
}
