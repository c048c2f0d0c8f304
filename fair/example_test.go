package fair_test

import (
	"context"
	"fmt"
	"github.com/rlock-go/rlock"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/fair"
)

// Three workers queue for a fair lock while it is held; they get it in the
// order they queued.
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, err := rlock.NewClient(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	holder, _ := fair.New(c, "payouts")
	if err := holder.Lock(ctx); err != nil {
		panic(err)
	}
	order := make(chan string, 3)
	done := make(chan struct{})
	for _, name := range []string{"first", "second", "third"} {
		l, _ := fair.New(c, "payouts")
		queued := len(mustQueue(holder))
		go func() {
			if err := l.Lock(ctx); err != nil {
				panic(err)
			}
			order <- name
			_ = l.Unlock(ctx)
			done <- struct{}{}
		}()
		for len(mustQueue(holder)) == queued { // wait until it has queued
		}
	}
	_ = holder.Unlock(ctx)
	for range 3 {
		<-done
		fmt.Println(<-order)
	}
	// Output:
	// first
	// second
	// third
}

func mustQueue(l *fair.Lock) []fair.Waiter {
	q, err := l.Queue(context.Background())
	if err != nil {
		panic(err)
	}
	return q
}

// Queue shows who waits, in order, and how long each keeps its place
// without renewing it.
func ExampleLock_Queue() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb, rlock.WithClientID("svc-a"))
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())

	holder, _ := fair.New(c, "reports")
	_ = holder.Lock(ctx)
	waiter, _ := fair.New(c, "reports")
	done := make(chan error)
	go func() { done <- waiter.Lock(ctx) }()
	for len(mustQueue(holder)) == 0 {
	}
	for _, w := range mustQueue(holder) {
		fmt.Println(w.Owner, w.Left > 0)
	}
	cancel() // the waiter gives up and leaves the queue
	fmt.Println(<-done)
	_ = holder.Unlock(context.Background())
	// Output:
	// svc-a:#2 true
	// rlock: waiting for "reports": context canceled
}
