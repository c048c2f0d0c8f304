package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
)

func Example() {
	// Five independent masters (embedded ones for the example), with
	// go-redis options that make a dead or frozen node fail fast.
	var nodes []*rlock.Client
	for range 5 {
		srv, _ := miniredis.Run()
		defer srv.Close()
		rdb := redis.NewClient(&redis.Options{
			Addr:          srv.Addr(),
			DialTimeout:   200 * time.Millisecond,
			ReadTimeout:   200 * time.Millisecond,
			WriteTimeout:  200 * time.Millisecond,
			MaxRetries:    1,
			DialerRetries: 1,
		})
		defer rdb.Close()
		c, err := rlock.NewClient(rdb)
		if err != nil {
			panic(err)
		}
		defer c.Close()
		nodes = append(nodes, c)
	}

	rl, err := redlock.New(nodes, "orders:42", redlock.WithLease(10*time.Second))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rl.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("valid for up to 10s:", time.Until(rl.Until()) <= 10*time.Second)

	other, _ := redlock.New(nodes, "orders:42")
	err = other.TryLock(ctx)
	var ne *multilock.Error
	fmt.Println("other:", errors.Is(err, rlock.ErrNotObtained), errors.As(err, &ne), len(ne.Failures))

	if err := rl.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// valid for up to 10s: true
	// other: true true 5
}
