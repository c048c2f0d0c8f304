package rwlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/rwlock"
)

func Example() {
	srv, _ := miniredis.Run() // an embedded Redis for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, err := rlock.NewClient(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	a, _ := rwlock.New(c, "prices")
	b, _ := rwlock.New(c, "prices")
	// Readers share.
	if err := a.ReadLock().Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("b reads:", b.ReadLock().TryLock(ctx))
	readers, _ := a.Readers(ctx)
	fmt.Println("readers:", len(readers))
	// A writer waits for them. A reader asking to write with a ctx from its
	// read holding is refused at once: an upgrade (with another ctx it
	// would wait for its own reads, as sync.RWMutex would).
	fmt.Println("b writes:", errors.Is(b.WriteLock().TryLock(b.ReadLock().Ctx()), rlock.ErrUpgrade), "(b reads: an upgrade)")
	_ = a.ReadLock().Unlock(ctx)
	_ = b.ReadLock().Unlock(ctx)
	fmt.Println("b writes:", b.WriteLock().TryLock(ctx))
	fmt.Println("a reads:", errors.Is(a.ReadLock().TryLock(ctx), rlock.ErrNotObtained))
	_ = b.WriteLock().Unlock(ctx)
	// Output:
	// b reads: <nil>
	// readers: 2
	// b writes: true (b reads: an upgrade)
	// b writes: <nil>
	// a reads: true
}

// A writer that must go on reading what it wrote takes the read lock
// before it releases the write lock: nobody writes in between.
func ExampleReadLock_downgrade() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, _ := rlock.NewClient(rdb)
	defer c.Close()
	ctx := context.Background()

	l, _ := rwlock.New(c, "config")
	_ = l.WriteLock().Lock(ctx)
	// ... write the config ...
	_ = l.ReadLock().Lock(l.WriteLock().Ctx()) // granted: a ctx from the write holding
	_ = l.WriteLock().Unlock(ctx)
	s, _ := l.State(ctx)
	fmt.Println("mode:", s.Mode, "readers:", len(s.Readers))
	// ... go on reading it; other readers may join now ...
	_ = l.ReadLock().Unlock(ctx)
	locked, _ := l.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// mode: read readers: 1
	// locked: false
}
