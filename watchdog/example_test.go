package watchdog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// A lock taken without a lease is renewed by its client's watchdog for as
// long as it is held; the client's WatchdogStats count the renewals.
func Example() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c, err := rlock.NewClient(rdb,
		rlock.WithWatchdogLease(3*time.Second),
		rlock.WithWatchdogInterval(20*time.Millisecond)) // the default is lease/3
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, _ := reentrant.New(c, "orders:42") // no WithLease: watchdog mode
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	for c.WatchdogStats().Renewed < 2 { // wait for two renewals
		time.Sleep(5 * time.Millisecond)
	}
	var s watchdog.Stats = c.WatchdogStats()
	fmt.Println("registered:", s.Registered, "lost:", s.Lost)
	fmt.Println("default lease:", watchdog.DefaultLease)
	if err := l.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("registered after Unlock:", c.WatchdogStats().Registered)
	// Output:
	// registered: 1 lost: 0
	// default lease: 30s
	// registered after Unlock: 0
}
