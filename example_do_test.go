package rlock_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
)

// Do takes the lock, runs the function and releases the lock, also when the
// function panics. The function's ctx ends if the lock is lost, and a Lock
// of the same handle with that ctx re-enters.
func ExampleDo() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	l, _ := reentrant.New(c, "invoice:42")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	err := rlock.Do(ctx, l, func(ctx context.Context) error {
		// Work here; stop when ctx ends (the lock was lost).
		if err := l.Lock(ctx); err != nil { // re-enters: ctx is the holding's
			return err
		}
		defer l.Unlock(ctx)
		n, _ := l.HoldCount(ctx)
		fmt.Println("holds inside:", n)
		return nil
	})
	fmt.Println("err:", err)
	held, _ := l.IsLocked(context.Background())
	fmt.Println("held after Do:", held)
	// Output:
	// holds inside: 2
	// err: <nil>
	// held after Do: false
}

// NewLocker adapts a handle to sync.Locker. Goroutines that share it
// exclude each other, here and in every other process that locks the same
// name.
func ExampleNewLocker() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	l, _ := reentrant.New(c, "counter")
	mu := rlock.NewLocker(l)
	var wg sync.WaitGroup
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			total++
		}()
	}
	wg.Wait()
	fmt.Println("total:", total)
	// Output:
	// total: 4
}
