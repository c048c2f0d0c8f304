package rlock_test

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// TestWithPubSubMode: the three modes are accepted where they apply;
// sharded pub/sub needs a cluster client, and an unknown mode is refused.
func TestWithPubSubMode(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	for _, mode := range []rlock.PubSubMode{rlock.PubSubAuto, rlock.PubSubClassic} {
		c, err := rlock.NewClient(rdb, rlock.WithPubSubMode(mode))
		require.NoError(t, err, mode)
		require.NoError(t, c.Close())
	}
	_, err := rlock.NewClient(rdb, rlock.WithPubSubMode(rlock.PubSubSharded))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "sharded on a single-server client")
	_, err = rlock.NewClient(rdb, rlock.WithPubSubMode(rlock.PubSubMode(9)))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	defer cc.Close()
	c, err := rlock.NewClient(cc, rlock.WithPubSubMode(rlock.PubSubSharded))
	require.NoError(t, err, "no I/O at construction")
	require.NoError(t, c.Close())
}

func ExamplePubSubMode() {
	for _, m := range []rlock.PubSubMode{rlock.PubSubAuto, rlock.PubSubSharded, rlock.PubSubClassic} {
		fmt.Println(m)
	}
	// Output:
	// auto
	// sharded
	// classic
}
