package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
)

// A function that takes a lock calls a helper that takes the same lock
// through its own handle: with an explicit owner in the context the helper
// re-enters instead of deadlocking.
func ExampleWithOwner() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	reserve := func(ctx context.Context) error { // takes the lock itself
		l, _ := reentrant.New(c, "stock:sku-1")
		if err := l.TryLock(ctx); err != nil {
			return err
		}
		defer l.Unlock(ctx)
		n, _ := l.HoldCount(ctx)
		fmt.Println("holds inside reserve:", n)
		return nil
	}

	l, _ := reentrant.New(c, "stock:sku-1")
	ctx := rlock.WithOwner(context.Background(), "order-1001")
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("same owner:", reserve(ctx))
	fmt.Println("no owner:", errors.Is(reserve(context.Background()), rlock.ErrNotObtained))
	_ = l.Unlock(ctx)

	fmt.Println("bad owner:", errors.Is(l.Lock(rlock.WithOwner(ctx, "")), rlock.ErrInvalidArgument))
	// Output:
	// holds inside reserve: 2
	// same owner: <nil>
	// no owner: true
	// bad owner: true
}

// One client per Redis deployment, one cheap handle per lock name; the
// lock is held until Unlock, or until ctx ends while waiting.
func ExampleNewClient() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	c, err := rlock.NewClient(rdb) // no I/O
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := reentrant.New(c, "orders:42") // no I/O
	if err != nil {
		panic(err)
	}
	if err := l.Lock(ctx); err != nil { // waits until held, or ctx ends
		panic(err)
	}
	defer l.Unlock(ctx)

	until := l.Until().Round(0) // Round(0) drops the monotonic clock reading
	fmt.Println("held for the next 30s:", time.Until(until) <= 30*time.Second)
	fmt.Println("lost:", l.Ctx().Err() != nil)
	// Output:
	// held for the next 30s: true
	// lost: false
}

// Bad input is an error wrapping ErrInvalidArgument, before any I/O.
func ExampleNewClient_badInput() {
	_, err := rlock.NewClient(nil)
	fmt.Println(errors.Is(err, rlock.ErrInvalidArgument))
	// Output:
	// true
}

// A lock keeps Redisson's data layout: a hash named after the lock, whose
// field is "<clientID>:<ownerID>" and value the hold count; derived keys
// such as the fencing counter carry the name in braces, so they stay in
// the lock's Redis Cluster hash slot.
func Example_dataLayout() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb, rlock.WithClientID("3f1c2a9e-0000-4000-8000-000000000001"))
	defer c.Close()
	ctx := context.Background()

	l, _ := reentrant.New(c, "orders:42", reentrant.WithFencing())
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	_ = l.Lock(l.Ctx()) // re-entry through the holding's ctx: the hold count goes to 2
	keys := srv.Keys()
	slices.Sort(keys)
	fmt.Println(keys)
	fmt.Println(rdb.HGetAll(ctx, "orders:42").Val())
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx)
	// Output:
	// [orders:42 redisson_lock_token:{orders:42}]
	// map[3f1c2a9e-0000-4000-8000-000000000001:#1:2]
}

// Many goroutines of one client, each on its own lock: with
// WithAutoPipeline their scripts share round trips.
func ExampleWithAutoPipeline() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close() // also stops rdb's auto-pipeliner
	c, err := rlock.NewClient(rdb, rlock.WithAutoPipeline())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	var wg sync.WaitGroup
	var done atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			l, _ := reentrant.New(c, fmt.Sprintf("orders:%d", i))
			if err := l.Lock(ctx); err != nil {
				return
			}
			defer func() { _ = l.Unlock(ctx) }()
			done.Add(1)
		})
	}
	wg.Wait()
	fmt.Println("orders handled:", done.Load())
	// Output:
	// orders handled: 16
}

// WatchdogStats and Waiters report what the client's watchdog and waiters
// are doing.
func ExampleClient_WatchdogStats() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	ctx := context.Background()

	l, _ := reentrant.New(c, "orders:42") // watchdog mode: renewed while held
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("registered with the watchdog:", c.WatchdogStats().Registered)
	fmt.Println("waiting:", c.Waiters().Waiters)
	_ = l.Unlock(ctx)
	fmt.Println("registered after Unlock:", c.WatchdogStats().Registered)
	// Output:
	// registered with the watchdog: 1
	// waiting: 0
	// registered after Unlock: 0
}
