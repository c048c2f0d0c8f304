package rwlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// checker is the shared in-memory model of a read-write lock: a critical
// section is entered right after Lock returns and left right before
// Unlock, so each one lies inside the server's holding and any overlap it
// sees is a real one.
type checker struct {
	mu               sync.Mutex
	readers, writers int
	maxReaders       int
	reads, writes    int
	violations       []string
}

func (c *checker) enterRead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers > 0 {
		c.violations = append(c.violations, fmt.Sprintf("a reader entered beside %d writer(s)", c.writers))
	}
	c.readers++
	c.reads++
	c.maxReaders = max(c.maxReaders, c.readers)
}

func (c *checker) leaveRead() {
	c.mu.Lock()
	c.readers--
	c.mu.Unlock()
}

func (c *checker) enterWrite() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers > 0 || c.readers > 0 {
		c.violations = append(c.violations, fmt.Sprintf("a writer entered beside %d writer(s) and %d reader(s)", c.writers, c.readers))
	}
	c.writers++
	c.writes++
}

func (c *checker) leaveWrite() {
	c.mu.Lock()
	c.writers--
	c.mu.Unlock()
}

// TestHammerReadersAndWriters: 100 reader goroutines and 5 writers on 4
// clients, each taking the lock a few times, with the invariant (no reader
// during a write, at most one writer) checked inside every critical
// section; readers overlap; everyone gets in; nothing is left behind. Also
// with the clients auto-pipelining, where the attempts of a client's
// overlapping calls wait for the auto-pipeliner's replies.
func TestHammerReadersAndWriters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		t.Run("plain", func(t *testing.T) { testHammerReadersAndWriters(t, b) })
		t.Run("auto-pipeline", func(t *testing.T) { testHammerReadersAndWriters(t, b, rlock.WithAutoPipeline()) })
	})
}

func testHammerReadersAndWriters(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := redistest.Name(t)
	clients := make([]*rlock.Client, 4)
	for i := range clients {
		clients[i] = newClient(t, b, opts...)
	}
	const readers, writers, rounds = 100, 5, 3
	var chk checker
	errs := make(chan error, readers+writers)
	var wg sync.WaitGroup
	for g := range readers + writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- hammer(ctx, clients[g%4], name, g < readers, rounds, &chk)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Empty(t, chk.violations)
	require.Equal(t, readers*rounds, chk.reads)
	require.Equal(t, writers*rounds, chk.writes)
	require.Greater(t, chk.maxReaders, 1, "readers shared the lock")
	l := newRW(t, clients[0], name)
	s := state(t, l)
	require.Equal(t, rwlock.State{}, s, "nothing held, nobody waiting")
	for _, c := range clients {
		require.Zero(t, c.Waiters().Waiters)
	}
}

func hammer(ctx context.Context, c *rlock.Client, name string, reader bool, rounds int, chk *checker) error {
	l, err := rwlock.New(c, name)
	if err != nil {
		return err
	}
	for range rounds {
		if reader {
			if err := l.ReadLock().Lock(ctx); err != nil {
				return err
			}
			chk.enterRead()
			time.Sleep(time.Millisecond) // work, so that readers overlap
			chk.leaveRead()
			if err := l.ReadLock().Unlock(ctx); err != nil {
				return err
			}
			continue
		}
		if err := l.WriteLock().Lock(ctx); err != nil {
			return err
		}
		chk.enterWrite()
		time.Sleep(time.Millisecond)
		chk.leaveWrite()
		if err := l.WriteLock().Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}
