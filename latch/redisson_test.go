package latch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
)

// A latch shared by a Go client and a Redisson client, both ways: Go sets
// and counts down while Redisson waits, then Redisson sets and counts down
// while Go waits (polls far beyond the deadline: woken by "0").
func TestRedissonSharesLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		r := redistest.NewRedisson(b.Universal(t), false)
		rs := r.CountDownLatch(name)
		c := clientOn(t, b.Universal(t))
		l := newLatch(t, c, name, latch.WithPoll(time.Hour))

		// Go → Redisson.
		ok, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		n, err := rs.Count(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		done := make(chan error, 1)
		go func() { done <- rs.Await(ctx) }()
		require.Eventually(t, func() bool { return r.Waits() > 0 }, 10*time.Second, time.Millisecond, "Redisson waits")
		require.NoError(t, rs.CountDown(ctx))
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, <-done)

		// Redisson → Go.
		ok, err = rs.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = l.TrySetCount(ctx, 9)
		require.NoError(t, err)
		require.False(t, ok, "Redisson's count is there")
		go func() { done <- l.Await(ctx) }()
		waiting(t, []*rlock.Client{c}, 1)
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, rs.CountDown(ctx))
		require.NoError(t, <-done)
	})
}

// On a Redis 7 cluster, a Redisson client listening and publishing sharded
// (its default there) and an rlock client in the default auto mode hear
// each other's messages.
func TestRedissonShardedOnCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := redistest.Name(t)
	r := redistest.NewRedisson(c.NewClient(t), true)
	rs := r.CountDownLatch(name)
	rc := clientOn(t, c.NewClient(t))
	l := newLatch(t, rc, name, latch.WithPoll(time.Hour))

	ok, err := l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	done := make(chan error, 1)
	go func() { done <- rs.Await(ctx) }()
	require.Eventually(t, func() bool { return r.Waits() > 0 }, 10*time.Second, time.Millisecond, "Redisson waits")
	require.NoError(t, l.CountDown(ctx))
	require.NoError(t, <-done, "Redisson heard rlock's SPUBLISH")

	ok, err = rs.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	go func() { done <- l.Await(ctx) }()
	waiting(t, []*rlock.Client{rc}, 1)
	require.NoError(t, rs.CountDown(ctx))
	require.NoError(t, <-done, "rlock heard Redisson's SPUBLISH")
}
