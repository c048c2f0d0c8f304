package multilock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

func Example() {
	// Two Redis servers (embedded ones for the example), one client each.
	var clients []*rlock.Client
	for range 2 {
		srv, _ := miniredis.Run()
		defer srv.Close()
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		c, err := rlock.NewClient(rdb)
		if err != nil {
			panic(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	stock, _ := reentrant.New(clients[0], "stock:7")
	wallet, _ := reentrant.New(clients[1], "wallet:42")

	m, err := multilock.New([]rlock.Locker{stock, wallet})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("held:", m.Name())

	// Anyone wanting one of the members now waits or fails.
	other, _ := reentrant.New(clients[1], "wallet:42")
	fmt.Println("other:", errors.Is(other.TryLock(ctx), rlock.ErrNotObtained))

	if err := m.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("other after unlock:", other.TryLock(ctx))
	_ = other.Unlock(ctx)
	// Output:
	// held: stock:7,wallet:42
	// other: true
	// other after unlock: <nil>
}

func ExampleMultiLock_TryLock() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()

	a, _ := reentrant.New(c, "seat:1")
	b, _ := reentrant.New(c, "seat:2")
	taken, _ := reentrant.New(c, "seat:2")
	ctx := context.Background()
	_ = taken.Lock(ctx)

	m, _ := multilock.New([]rlock.Locker{a, b})
	err := m.TryLock(ctx)
	fmt.Println("not obtained:", errors.Is(err, rlock.ErrNotObtained))
	locked, _ := a.IsLocked(ctx) // seat:1 was taken and released again
	fmt.Println("seat:1 locked:", locked)
	_ = taken.Unlock(ctx)
	// Output:
	// not obtained: true
	// seat:1 locked: false
}
