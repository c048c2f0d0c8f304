package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
)

func Example() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	c, err := rlock.NewClient(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	l, err := reentrant.New(c, "orders:42")
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	// The holder re-enters with a ctx from its holding: l.Ctx(), or any
	// ctx derived from it. A Lock with another ctx waits for the Unlock,
	// as a second sync.Mutex.Lock would.
	if err := l.Lock(l.Ctx()); err != nil {
		panic(err)
	}
	n, _ := l.HoldCount(ctx)
	fmt.Println("holds:", n)

	other, _ := reentrant.New(c, "orders:42") // another handle is another owner
	fmt.Println("other:", errors.Is(other.TryLock(ctx), rlock.ErrNotObtained))

	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx)
	locked, _ := l.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// holds: 2
	// other: true
	// locked: false
}

func ExampleWithLease() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	// An explicit lease: the lock expires after it, and nothing renews it.
	l, err := reentrant.New(c, "report:daily", reentrant.WithLease(10*time.Second))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := l.TryLock(ctx); err != nil {
		panic(err)
	}
	ttl, _ := l.TTL(ctx)
	fmt.Println(ttl > 9*time.Second && ttl <= 10*time.Second)
	_ = l.Unlock(ctx)
	// Output: true
}

func ExampleLock_Done() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	l, _ := reentrant.New(c, "jobs:nightly")

	ctx := context.Background()
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	// In a long critical section, stop as soon as the lock is lost.
	for step := range 3 {
		select {
		case <-l.Done():
			fmt.Println("lost:", l.Err())
			return
		default:
		}
		fmt.Println("step", step)
	}
	_ = l.Unlock(ctx)
	<-l.Done() // closed by the last Unlock too, with a nil Err
	fmt.Println("released, err:", l.Err())
	// Output:
	// step 0
	// step 1
	// step 2
	// released, err: <nil>
}

func Example_owner() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	// Code that builds its own handle re-enters when it carries the owner.
	ctx := rlock.WithOwner(context.Background(), "request-7f3a")
	outer, _ := reentrant.New(c, "account:9")
	_ = outer.Lock(ctx)
	inner, _ := reentrant.New(c, "account:9")
	fmt.Println(inner.TryLock(ctx) == nil)
	n, _ := inner.HoldCount(ctx)
	fmt.Println(n)
	_ = inner.Unlock(ctx)
	_ = outer.Unlock(ctx)
	// Output:
	// true
	// 2
}

// A store that remembers the highest fencing token it has seen refuses a
// write from a holder whose lock has meanwhile been granted to another.
func ExampleWithFencing() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	ctx := context.Background()

	store := &fencedStore{}
	slow, _ := reentrant.New(c, "ledger:7", reentrant.WithFencing(), reentrant.WithLease(time.Minute))
	fast, _ := reentrant.New(c, "ledger:7", reentrant.WithFencing())

	_ = slow.Lock(ctx)
	staleToken := slow.Token()
	_, _ = fast.ForceUnlock(ctx) // stands in for slow's lease running out during a pause
	_ = fast.Lock(ctx)
	fmt.Println("fast writes:", store.write(fast.Token(), "balance=90"))
	_ = fast.Unlock(ctx)
	fmt.Println("slow writes:", store.write(staleToken, "balance=100"))
	fmt.Println("stored:", store.value)
	// Output:
	// fast writes: <nil>
	// slow writes: stale token 1 (seen 2)
	// stored: balance=90
}

// fencedStore accepts a write only with a token at least as high as any
// it has seen.
type fencedStore struct {
	highest int64
	value   string
}

func (s *fencedStore) write(token int64, value string) error {
	if token < s.highest {
		return fmt.Errorf("stale token %d (seen %d)", token, s.highest)
	}
	s.highest, s.value = token, value
	return nil
}
