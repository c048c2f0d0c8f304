package base

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Redis is the part of a go-redis v9 client that rlock uses. *redis.Client,
// *redis.ClusterClient, the failover (Sentinel) clients and *redis.Ring all
// satisfy it; so does any wrapper that forwards these methods.
type Redis interface {
	redis.Scripter
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
	HExists(ctx context.Context, key, field string) *redis.BoolCmd
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	PTTL(ctx context.Context, key string) *redis.DurationCmd
}
