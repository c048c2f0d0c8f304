package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// asksBetween counts the readers' asks logged after from and before to.
func (e *events) asksBetween(from, to int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.log {
		if ev.what == "ask" && ev.seq > from && ev.seq < to {
			n++
		}
	}
	return n
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

		// A round: the writer calls Lock while readers flow. It tests the
		// order only if the writer is seen registered before it is granted
		// and a reader asks in between; on a slow host the writer may find
		// a gap between readers, be granted between two looks, or be granted
		// before a reader asks, and then it goes again.
		var waits [][2]int // the registration's and the write's sequence numbers
		for round := 0; ; round++ {
			require.Less(t, round, 20, "the writer was never seen waiting while a reader asked")
			wrote := make(chan int, 1) // the write's sequence number
			go func() {
				if err := w.WriteLock().Lock(ctx); err != nil {
					errs <- err
					close(wrote)
					return
				}
				wrote <- log.add("write", 0)
			}()
			seen := make(chan int, 1) // the registration's sequence number; 0 if not seen
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				select {
				case <-wrote: // granted (or failed) before it was seen waiting
					seen <- 0
					return
				default:
				}
				s, err := w.State(ctx)
				require.NoError(c, err)
				require.Len(c, s.Waiting, 1)
				seen <- log.add("registered", 0)
			}, 20*time.Second, time.Millisecond)
			registered := <-seen
			if registered == 0 {
				require.Empty(t, errs, "the writer's Lock failed")
				require.NoError(t, w.WriteLock().Unlock(ctx))
				continue
			}
			writeSeq := <-wrote
			require.NotZero(t, writeSeq, "the writer was granted while readers kept arriving")
			require.NoError(t, w.WriteLock().Unlock(ctx))
			waits = append(waits, [2]int{registered, writeSeq})
			if log.asksBetween(registered, writeSeq) > 0 {
				break
			}
		}
		asksMeanwhile := next.Load()
		// Readers go on after the write.
		require.Eventually(t, func() bool { return next.Load() > asksMeanwhile+5 }, 20*time.Second, time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		// Event order: in every round, no reader that asked after the
		// registration was seen was granted before the write.
		log.mu.Lock()
		defer log.mu.Unlock()
		for _, wait := range waits {
			registered, wrote := wait[0], wait[1]
			asked := map[int]int{}
			for _, e := range log.log {
				switch e.what {
				case "ask":
					asked[e.who] = e.seq
				case "read":
					if e.seq < wrote && asked[e.who] > registered {
						t.Fatalf("reader %d asked after the writer registered and got in before it", e.who)
					}
				}
			}
		}
	})
}
