package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// events is a shared, ordered log of what the readers and the writer did.
type events struct {
	mu  sync.Mutex
	seq int
	log []event
}

type event struct {
	seq  int
	what string // "ask" (a new reader calls Lock), "read" (granted), "registered", "write"
	who  int
}

func (e *events) add(what string, who int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	e.log = append(e.log, event{e.seq, what, who})
	return e.seq
}

// TestWriterNotStarved: readers arrive continuously (each overlapping the
// next, so the lock never leaves read mode on its own); a writer that
// asks meanwhile is granted, and no reader that asked after the writer
// was seen registered gets in before it. The wait is bounded by the
// test's ctx, a liveness bound far above the stated D + T/3, not a timing
// assertion.
func TestWriterNotStarved(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(3 * time.Second)}
		clients := []*rlock.Client{newClient(t, b), newClient(t, b), newClient(t, b)}
		var log events
		var next atomic.Int64 // reader IDs
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		// Six reader loops: each reader holds ~20 ms, and a new one starts
		// every few ms, so readers keep overlapping.
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					id := int(next.Add(1))
					l, err := rwlock.New(clients[g%3], name, opts...)
					if err != nil {
						errs <- err
						return
					}
					log.add("ask", id)
					if err := l.ReadLock().Lock(ctx); err != nil {
						errs <- err
						return
					}
					log.add("read", id)
					time.Sleep(20 * time.Millisecond) // work
					if err := l.ReadLock().Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		w := newRW(t, clients[0], name, opts...)
		// Readers flow, and without waiting the writer cannot get in.
		require.Eventually(t, func() bool { return next.Load() > 30 }, 20*time.Second, time.Millisecond)
		require.ErrorIs(t, w.WriteLock().TryLock(ctx), rlock.ErrNotObtained)

		wrote := make(chan error, 1)
		go func() {
			err := w.WriteLock().Lock(ctx)
			if err == nil {
				log.add("write", 0)
			}
			wrote <- err
		}()
		var registered int
		require.Eventually(t, func() bool {
			if len(state(t, w).Waiting) == 1 {
				registered = log.add("registered", 0)
				return true
			}
			return false
		}, 20*time.Second, time.Millisecond)
		require.NoError(t, <-wrote, "the writer was granted while readers kept arriving")
		asksMeanwhile := next.Load()
		require.NoError(t, w.WriteLock().Unlock(ctx))
		// Readers go on after the write.
		require.Eventually(t, func() bool { return next.Load() > asksMeanwhile+5 }, 20*time.Second, time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		// Event order: no reader that asked after the registration was seen
		// was granted before the write; and readers did ask meanwhile.
		asked := map[int]int{}
		var wrote1, askedDuring int
		for _, e := range log.log {
			switch e.what {
			case "ask":
				asked[e.who] = e.seq
				if e.seq > registered && wrote1 == 0 {
					askedDuring++
				}
			case "write":
				wrote1 = e.seq
			case "read":
				if wrote1 == 0 && asked[e.who] > registered {
					t.Fatalf("reader %d asked after the writer registered and got in before it", e.who)
				}
			}
		}
		require.NotZero(t, wrote1)
		require.Positive(t, askedDuring, "readers kept arriving while the writer waited")
	})
}
