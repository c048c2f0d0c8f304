package rwlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// countHook counts the commands a go-redis client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// BenchmarkUncontended: one goroutine, lock+unlock of one side on one key
// nobody else uses, on miniredis and redis-server, with the reentrant lock
// measured in the same run for comparison (benchstat-friendly names:
// read, write, reentrant; and read-try, write-try with TryLock). Reports
// the commands sent per lock+unlock (pub/sub commands not seen) and, on
// redis-server, the commands the server ran (INFO commandstats, those run
// inside scripts included). A blocking read-write Lock granted at once
// touches no pub/sub (it joins its channel before its first attempt only
// when the client listens to it already), so Lock and TryLock cost the
// same here (TestUncontendedRWLockTouchesNoPubSub pins the commands).
func BenchmarkUncontended(b *testing.B) {
	for _, be := range []struct {
		name string
		get  func(testing.TB) *redistest.Backend
	}{{"miniredis", redistest.Mini}, {"redis", redistest.Real}} {
		b.Run(be.name, func(b *testing.B) {
			backend := be.get(b)
			rdb := backend.NewClient(b)
			hook := &countHook{}
			rdb.AddHook(hook)
			c, err := rlock.NewClient(rdb)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rw, err := rwlock.New(c, redistest.Name(b))
			if err != nil {
				b.Fatal(err)
			}
			re, err := reentrant.New(c, redistest.Name(b)+":reentrant")
			if err != nil {
				b.Fatal(err)
			}
			for _, side := range []struct {
				name string
				l    rlock.Locker
				try  bool
			}{{"read", rw.ReadLock(), false}, {"write", rw.WriteLock(), false}, {"reentrant", re, false},
				{"read-try", rw.ReadLock(), true}, {"write-try", rw.WriteLock(), true}} {
				b.Run(side.name, func(b *testing.B) { lockUnlock(b, side.l, side.try, hook, backend.IsReal(), rdb) })
			}
		})
	}
}

// serverCommands returns how many commands the server has run (INFO
// commandstats), or 0 on error.
func serverCommands(rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if _, stats, ok := strings.Cut(line, ":calls="); ok {
			calls, _, _ := strings.Cut(stats, ",")
			c, _ := strconv.ParseInt(calls, 10, 64)
			n += c
		}
	}
	return n
}

func lockUnlock(b *testing.B, l rlock.Locker, try bool, hook *countHook, real bool, rdb *redis.Client) {
	ctx := context.Background()
	lock := l.Lock
	if try {
		lock = l.TryLock
	}
	if err := l.Lock(ctx); err != nil { // load the scripts
		b.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	var server0 int64
	if real {
		server0 = serverCommands(rdb)
	}
	hook.n.Store(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(hook.n.Load())/float64(b.N), "commands/op")
	if real {
		// less the INFO call that reads the count, and this one's
		b.ReportMetric(float64(serverCommands(rdb)-server0-1)/float64(b.N), "server-commands/op")
	}
}
