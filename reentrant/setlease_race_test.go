package reentrant_test

import (
	"context"
	"fmt"
	"github.com/rlock-go/rlock"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// holdRenewal is a go-redis hook that stops the first watchdog renewal
// (the renew script with the watchdog's lease) before it is sent, until
// the test lets it go: a renewal in flight.
type holdRenewal struct {
	lease    string // the watchdog's lease in ms, as the scheduler sends it
	once     sync.Once
	inFlight chan struct{} // closed when the renewal is held
	letGo    chan struct{} // closed by the test
	answered chan struct{} // closed once the renewal's reply is in
}

func (h *holdRenewal) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (h *holdRenewal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.isRenewal(cmd) || !h.first() {
			return next(ctx, cmd)
		}
		return h.hold(func() error { return next(ctx, cmd) })
	}
}

// The watchdog sends its renewals in a pipeline per node.
func (h *holdRenewal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, h.isRenewal) || !h.first() {
			return next(ctx, cmds)
		}
		return h.hold(func() error { return next(ctx, cmds) })
	}
}

// isRenewal reports whether cmd renews one lock with the watchdog's lease
// (EVAL or EVALSHA of the renew script: name, body, 1, key, lease, field).
func (h *holdRenewal) isRenewal(cmd redis.Cmder) bool {
	a := cmd.Args()
	name := strings.ToLower(fmt.Sprint(a[0]))
	return len(a) == 6 && (name == "evalsha" || name == "eval") && fmt.Sprint(a[4]) == h.lease
}

func (h *holdRenewal) first() (first bool) {
	h.once.Do(func() { first = true })
	return first
}

// hold sends the renewal only once the test lets it go.
func (h *holdRenewal) hold(send func() error) error {
	close(h.inFlight)
	<-h.letGo
	err := send()
	close(h.answered)
	return err
}

// Regression (issue 12, suspicion: SetLease racing a renewal in flight).
// SetLease switches a watchdog lock to an explicit lease while a renewal
// of it is on its way; the renewal then runs on the server after SetLease
// and sets the watchdog's lease again: the lock outlives the lease its
// owner set by the whole watchdog lease, with nothing left to end it.
func TestSetLeaseOutlastsARenewalInFlight(t *testing.T) {
	const wdLease, lease = 3 * time.Second, 200 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		hook := &holdRenewal{
			lease:    fmt.Sprint(wdLease.Milliseconds()),
			inFlight: make(chan struct{}),
			letGo:    make(chan struct{}),
			answered: make(chan struct{}),
		}
		rdb := b.NewClient(t)
		rdb.AddHook(hook)
		c := clientOn(t, rdb, rlock.WithWatchdogLease(wdLease), rlock.WithWatchdogInterval(20*time.Millisecond))
		l := newLock(t, c, redistest.Name(t))
		require.NoError(t, l.Lock(ctx))
		<-hook.inFlight

		done := make(chan error, 1)
		go func() { done <- l.SetLease(ctx, lease) }()
		select {
		case err := <-done: // before the fix: SetLease did not wait for it
			close(hook.letGo)
			require.NoError(t, err)
		case <-time.After(100 * time.Millisecond): // SetLease waits for the renewal
			close(hook.letGo)
			require.NoError(t, <-done)
		}
		<-hook.answered
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, lease, "the renewal in flight set the watchdog's lease again")
	})
}
