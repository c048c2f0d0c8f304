package lua_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

var minAcquire = redis.NewScript(`if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return nil
end
return redis.call('PTTL', KEYS[1])`)
var minRelease = redis.NewScript(`if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('HINCRBY', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[3])
return 1`)

func BenchmarkZZScripts(b *testing.B) {
	ctx := context.Background()
	be := redistest.Real(b)
	rdb := be.NewClient(b)
	for _, s := range lua.All() {
		s.Load(ctx, rdb)
	}
	minAcquire.Load(ctx, rdb)
	minRelease.Load(ctx, rdb)
	b.Run("rlockscripts", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := lua.Lock.EvalSha(ctx, rdb, []string{"k", "fence{k}", "reg{k}"}, 30000, "c1:o1", 0, "0", "", "0", 1000).Err(); err != nil {
				b.Fatal(err)
			}
			if err := lua.Unlock.EvalSha(ctx, rdb, []string{"k", "redisson_lock__channel:{k}", "latch{k}:c1:o1", "reg{k}"}, 30000, "c1:o1", 1, "0", 48000, "c", "req"+strconv.Itoa(i), 2).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redissonfloor", func(b *testing.B) {
		for b.Loop() {
			minAcquire.EvalSha(ctx, rdb, []string{"m"}, 30000, "owner")
			minRelease.EvalSha(ctx, rdb, []string{"m", "redisson_lock__channel:{m}"}, 30000, "owner", 0)
		}
	})
}
