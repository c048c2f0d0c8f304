package waiters_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func signalled(w *waiters.Waiter) bool {
	select {
	case <-w.C:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func quiet(w *waiters.Waiter) bool {
	select {
	case <-w.C:
		return false
	default:
		return true
	}
}

func TestHub(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		ch := redistest.Name(t)
		require.Nil(t, h.JoinBehind(ch), "nobody waits yet")

		w1, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(w1), "signalled once the subscription is confirmed")
		w2 := h.JoinBehind(ch)
		require.NotNil(t, w2)
		require.True(t, quiet(w2), "joining a live subscription is not a wake-up")
		require.Equal(t, waiters.Stats{Connections: 1, Channels: 1, Waiters: 2}, h.Stats())

		publish := func(msg string) { require.NoError(t, rdb.Publish(ctx, ch, msg).Err()) }
		publish("0")
		require.True(t, signalled(w1), "an unlock wakes the longest waiter")
		require.True(t, quiet(w2))
		publish("0")
		require.True(t, signalled(w1), "again: w1 had no wake-up pending")

		// A waiter that leaves with a wake-up pending passes it on.
		publish("0")
		require.Eventually(t, func() bool { return len(w1.C) == 1 }, 5*time.Second, time.Millisecond)
		w1.Leave()
		require.True(t, signalled(w2))

		w3, ok := h.Join(ch)
		require.True(t, ok)
		publish("1") // a read-unlock wakes everyone
		require.True(t, signalled(w2))
		require.True(t, signalled(w3))

		w2.Leave()
		w3.Leave()
		require.Eventually(t, func() bool { return h.Stats() == waiters.Stats{Connections: 1} }, 5*time.Second, time.Millisecond,
			"the last waiter unsubscribes")
		if b.IsReal() {
			require.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, ch).Result()
				return err == nil && n[ch] == 0
			}, 5*time.Second, time.Millisecond)
		}

		// Subscribe again at once: confirmed by its own acknowledgement.
		w4, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(w4))
		w4.Leave()

		h.Close()
		_, ok = h.Join(ch)
		require.False(t, ok, "closed")
	})
}

func TestRingOpensOneConnectionPerChannel(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": b.Addr}})
		defer ring.Close()
		h := newHub(t, ring)
		defer h.Close()
		base := redistest.Name(t)
		w1, ok := h.Join(base + ":1")
		require.True(t, ok)
		w2, ok := h.Join(base + ":2")
		require.True(t, ok)
		require.True(t, signalled(w1))
		require.True(t, signalled(w2))
		require.Equal(t, 2, h.Stats().Connections)
		require.NoError(t, ring.Publish(ctx, base+":2", "0").Err())
		require.True(t, signalled(w2))
		w1.Leave()
		w2.Leave()
		require.Eventually(t, func() bool { return h.Stats().Connections == 0 }, 5*time.Second, time.Millisecond)
	})
}

// TestRejoinBeforeConfirmation: a channel whose last waiter leaves before
// the server confirmed its SUBSCRIBE, and is joined again at once, is
// confirmed for the new waiter, and nothing is left subscribed after.
func TestRejoinBeforeConfirmation(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h := newHub(t, b.NewClient(t))
		defer h.Close()
		for i := range 50 {
			ch := redistest.Name(t) + ":" + strconv.Itoa(i)
			w, ok := h.Join(ch)
			require.True(t, ok)
			w.Leave()
			w2, ok := h.Join(ch)
			require.True(t, ok)
			require.True(t, signalled(w2), "iteration %d", i)
			w2.Leave()
		}
		require.Eventually(t, func() bool { return h.Stats() == waiters.Stats{Connections: 1} }, 5*time.Second, time.Millisecond,
			"unsubscribed once they stopped lingering")
	})
}

// TestLingerKeepsSubscription: a channel stays subscribed for a while after
// its last waiter left. A waiter joining it then needs no new SUBSCRIBE;
// it is signalled at once only if a message arrived meanwhile.
func TestLingerKeepsSubscription(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		ch := redistest.Name(t)
		w, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(w)) // confirmed
		w.Leave()
		require.Equal(t, waiters.Stats{Connections: 1, Lingering: 1}, h.Stats())

		w, ok = h.Join(ch)
		require.True(t, ok)
		require.True(t, quiet(w), "nothing happened while it lingered")
		require.NoError(t, rdb.Publish(ctx, ch, "0").Err())
		require.True(t, signalled(w))
		w.Leave()

		require.NoError(t, rdb.Publish(ctx, ch, "0").Err())
		require.Eventually(t, func() bool {
			n, err := rdb.PubSubNumSub(ctx, ch).Result()
			return err == nil && n[ch] == 1
		}, 5*time.Second, time.Millisecond)
		// The message reached the lingering topic before this Join, or
		// after it: either way the new waiter hears of it.
		w, ok = h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(w), "a message while it lingered is not lost")
		w.Leave()
		require.Eventually(t, func() bool { return h.Stats() == waiters.Stats{Connections: 1} }, 5*time.Second, time.Millisecond)
	})
}

// newHub returns a hub on rdb in the default (Auto) mode.
func newHub(t testing.TB, rdb waiters.Subscriber) *waiters.Hub {
	t.Helper()
	h, err := waiters.New(rdb, waiters.Auto)
	require.NoError(t, err)
	return h
}

// TestModeResolution: off a cluster, Auto is classic (miniredis has no
// SPUBLISH, and Redisson uses sharded pub/sub only on clusters); Sharded
// needs a cluster client; an unknown mode is refused.
func TestModeResolution(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		require.Equal(t, "c", h.Publish(context.Background()))
		c, err := waiters.New(rdb, waiters.Classic)
		require.NoError(t, err)
		require.Equal(t, "c", c.Publish(context.Background()))
		_, err = waiters.New(rdb, waiters.Sharded)
		require.ErrorIs(t, err, base.ErrInvalidArgument)
		_, err = waiters.New(rdb, waiters.Mode(7))
		require.ErrorIs(t, err, base.ErrInvalidArgument)
	})
}

// TestPreferredWaiterWokenFirst: an unlock message ("0") wakes a preferred
// waiter (a read-write lock's writer) before longer-waiting others; with
// its wake-up pending, the next goes to the longest waiter; "1" wakes all.
func TestPreferredWaiterWokenFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		ch := redistest.Name(t)
		reader, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(reader))
		writer := h.JoinBehind(ch)
		require.NotNil(t, writer)
		writer.Prefer()

		publish := func(msg string) { require.NoError(t, rdb.Publish(ctx, ch, msg).Err()) }
		publish("0")
		require.True(t, signalled(writer), "the writer first")
		require.True(t, quiet(reader))
		publish("0")
		require.Eventually(t, func() bool { return len(writer.C) == 1 }, 5*time.Second, time.Millisecond)
		publish("0")
		require.True(t, signalled(reader), "the writer has one pending: the longest waiter next")
		require.True(t, signalled(writer))
		publish("1")
		require.True(t, signalled(reader))
		require.True(t, signalled(writer))
		reader.Leave()
		writer.Leave()
	})
}

// TestPassedOnWakeUpGoesToAPreferredWaiterFirst: a wake-up passed on
// unused goes to a preferred waiter (a read-write lock's writer) before
// longer-waiting others (regression: it went to the longest waiter, a
// reader that could not use it; see rwlock's
// TestPassedOnWakeUpReachesTheOtherWriter); PassOnToPreferred wakes a
// preferred waiter without a wake-up pending, and nobody else.
func TestPassedOnWakeUpGoesToAPreferredWaiterFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		ch := redistest.Name(t)
		reader, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(reader))
		w1, w2 := h.JoinBehind(ch), h.JoinBehind(ch)
		require.NotNil(t, w1)
		require.NotNil(t, w2)
		w1.Prefer()
		w2.Prefer()

		require.NoError(t, rdb.Publish(context.Background(), ch, "0").Err())
		require.True(t, signalled(w1), "the first writer first")
		w1.PassOn()
		require.True(t, signalled(w2), "passed on to the other writer")
		require.True(t, quiet(reader))

		require.True(t, reader.PassOnToPreferred())
		require.True(t, reader.PassOnToPreferred())
		require.False(t, reader.PassOnToPreferred(), "both writers have a wake-up pending")
		require.True(t, signalled(w1))
		require.True(t, signalled(w2))
		require.True(t, w1.PassOnToPreferred())
		require.True(t, quiet(reader), "never to a reader")
		require.True(t, signalled(w2))
		reader.Leave()
		w1.Leave()
		w2.Leave()
	})
}

// TestDesignatedReadUnlockWakesOneWriter: a "1" (a read-write lock's write
// release) that follows a designation of this client wakes one waiter, a
// preferred one (a writer) first, rather than every waiter; one that
// follows a designation of other clients wakes nobody here; one without a
// designation wakes every waiter, as before (issue 30).
func TestDesignatedReadUnlockWakesOneWriter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		h.SetDesignation("42", func(string, bool, bool) {})
		ch := redistest.Name(t)
		reader, ok := h.Join(ch)
		require.True(t, ok)
		require.True(t, signalled(reader))
		writer := h.JoinBehind(ch)
		require.NotNil(t, writer)
		writer.Prefer()
		probe, ok := h.Join(ch + ":probe")
		require.True(t, ok)
		require.True(t, signalled(probe))
		publish := func(c, msg string) { require.NoError(t, rdb.Publish(ctx, c, msg).Err()) }

		publish(ch, "42")
		publish(ch, "1")
		require.True(t, signalled(writer), "the designated client's writer")
		publish(ch+":probe", "0") // on the same connection: the "1" was handled before it
		require.True(t, signalled(probe))
		require.True(t, quiet(reader), "one waiter only")

		publish(ch, "7")
		publish(ch, "1")
		publish(ch+":probe", "0")
		require.True(t, signalled(probe))
		require.True(t, quiet(writer), "designated for another client")
		require.True(t, quiet(reader), "designated for another client")

		publish(ch, "1")
		require.True(t, signalled(writer), "undesignated: everyone")
		require.True(t, signalled(reader), "undesignated: everyone")
		reader.Leave()
		writer.Leave()
		probe.Leave()
	})
}

// TestJoinIfListeningAndJoinAfter: JoinIfListening registers nothing and
// subscribes nothing when the hub lacks the channel (an uncontended
// read-write Lock touches no pub/sub), and joins a channel it has, with
// waiters or lingering. JoinAfter, for a caller that found the channel
// missing and then attempted, is woken by a new channel's confirmation,
// and at once when the channel appeared meanwhile: a message published
// after the caller's attempt may have gone to the channel's other waiters
// only.
func TestJoinIfListeningAndJoinAfter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h := newHub(t, b.NewClient(t))
		defer h.Close()
		ch := redistest.Name(t)
		require.Nil(t, h.JoinIfListening(ch), "no channel yet")
		require.Equal(t, waiters.Stats{}, h.Stats(), "nothing subscribed")

		w1, ok := h.JoinAfter(ch) // a new channel: woken by its confirmation
		require.True(t, ok)
		require.True(t, signalled(w1), "signalled once the subscription is confirmed")
		require.True(t, quiet(w1))

		w2, ok := h.JoinAfter(ch) // the channel appeared after w2's look
		require.True(t, ok)
		require.True(t, signalled(w2), "a channel that appeared meanwhile wakes the late joiner at once")
		w3 := h.JoinIfListening(ch)
		require.NotNil(t, w3, "a channel with waiters")
		require.True(t, quiet(w3), "joining a live subscription is not a wake-up")
		require.Equal(t, 3, h.Stats().Waiters)

		w1.Leave()
		w2.Leave()
		w3.Leave()
		require.Equal(t, 1, h.Stats().Lingering)
		w4 := h.JoinIfListening(ch)
		require.NotNil(t, w4, "a lingering channel")
		require.True(t, quiet(w4))
		w4.Leave()
	})
}
