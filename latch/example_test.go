package latch_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/latch"
)

// Three services count down a start line; the coordinator waits for all.
func Example() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	client, _ := rlock.NewClient(rdb)
	defer client.Close()

	ctx := context.Background()
	start, _ := latch.New(client, "start-line")
	ok, _ := start.TrySetCount(ctx, 3)
	fmt.Println("set:", ok)
	for range 3 {
		go func() { _ = start.CountDown(ctx) }()
	}
	if err := start.Await(ctx); err != nil {
		fmt.Println(err)
	}
	n, _ := start.Count(ctx)
	fmt.Println("count:", n)
	// Output:
	// set: true
	// count: 0
}
