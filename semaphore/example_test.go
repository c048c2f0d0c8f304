package semaphore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/semaphore"
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
	s, err := semaphore.New(c, "partner-api")
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	set, _ := s.TrySetPermits(ctx, 2) // the first caller sets the pool
	fmt.Println("set:", set)
	if err := s.Acquire(ctx, 2); err != nil {
		panic(err)
	}
	ok, _ := s.TryAcquire(ctx, 1)
	fmt.Println("third permit:", ok)
	_ = s.Release(ctx, 2)
	n, _ := s.AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// set: true
	// third permit: false
	// available: 2
}

func ExampleSemaphore_AddPermits() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	s, _ := semaphore.New(c, "workers")

	ctx := context.Background()
	_ = s.AddPermits(ctx, 3)
	_ = s.AddPermits(ctx, -5) // may go below zero
	n, _ := s.AvailablePermits(ctx)
	fmt.Println("available:", n)
	drained, _ := s.DrainPermits(ctx)
	fmt.Println("drained:", drained)
	// Output:
	// available: -2
	// drained: 0
}

func ExampleExpirable() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	e, err := semaphore.NewExpirable(c, "partner-api")
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	_, _ = e.TrySetPermits(ctx, 1)
	p, err := e.Acquire(ctx) // no lease: the watchdog renews it while we live
	if err != nil {
		panic(err)
	}
	fmt.Println("ID length:", len(p.ID()))
	other, _ := e.TryAcquire(ctx, semaphore.WithLease(time.Minute))
	fmt.Println("second permit:", other != nil)
	_ = p.Release(ctx)
	fmt.Println("lost:", p.Err() != nil)
	n, _ := e.AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// ID length: 32
	// second permit: false
	// lost: false
	// available: 1
}
