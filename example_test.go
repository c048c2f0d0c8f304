package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlock-go/rlock/internal/base"

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

// The keys and channels of a lock follow Redisson's layout and stay in the
// lock's hash slot, so every script runs on one Redis Cluster node.
func ExampleDerivedKey() {
	for _, name := range []string{"orders:42", "{user:7}:cart"} {
		fmt.Println(name, "->", base.Channel(name))
		fmt.Println(name, "->", base.DerivedKey(base.QueuePrefix, name))
		fmt.Println("same slot:", base.Slot(name) == base.Slot(base.DerivedKey(base.TokenPrefix, name)))
	}
	// Output:
	// orders:42 -> redisson_lock__channel:{orders:42}
	// orders:42 -> redisson_lock_queue:{orders:42}
	// same slot: true
	// {user:7}:cart -> redisson_lock__channel:{user:7}:cart
	// {user:7}:cart -> redisson_lock_queue:{user:7}:cart
	// same slot: true
}

func ExampleValidateName() {
	fmt.Println(base.ValidateName("orders:42"))
	err := base.ValidateName("")
	fmt.Println(errors.Is(err, rlock.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}
