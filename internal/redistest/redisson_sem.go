package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RSemaphore is the Redisson double's RSemaphore, written from the facts
// in REDISSON-SYNC-NOTES.md §1: the counter under the name (a decimal
// integer, missing = 0), the channel "redisson_sc:{name}" carrying the
// new count, and the blocking acquire (try, subscribe, then try again on
// every message; untimed, as Redisson's acquire is: no poll).
type RSemaphore struct {
	r    *Redisson
	name string
}

// Semaphore returns the RSemaphore called name.
func (r *Redisson) Semaphore(name string) *RSemaphore { return &RSemaphore{r: r, name: name} }

func (s *RSemaphore) channel() string { return derived("redisson_sc", s.name) }

func (s *RSemaphore) publishCmd() string {
	if s.r.Sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// TryAcquire is tryAcquire(n) without a wait.
func (s *RSemaphore) TryAcquire(ctx context.Context, n int) (bool, error) {
	v, err := redissonSemAcquire.Run(ctx, s.r.rdb, []string{s.name}, n).Int64()
	return v == 1, err
}

// Acquire is acquire(n): it waits for a message on the channel, with no
// time limit, until ctx ends.
func (s *RSemaphore) Acquire(ctx context.Context, n int) error {
	if ok, err := s.TryAcquire(ctx, n); ok || err != nil {
		return err
	}
	var ps *redis.PubSub
	if s.r.Sharded {
		ps = s.r.rdb.SSubscribe(ctx, s.channel())
	} else {
		ps = s.r.rdb.Subscribe(ctx, s.channel())
	}
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return err
	}
	msgs := ps.Channel()
	for {
		if ok, err := s.TryAcquire(ctx, n); ok || err != nil {
			return err
		}
		s.r.waits.Add(1)
		select {
		case m := <-msgs:
			if _, err := strconv.ParseInt(m.Payload, 10, 64); err != nil {
				return fmt.Errorf("redisson: LongCodec cannot decode %q on %s: %w", m.Payload, m.Channel, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release is release(n): INCRBY and publish the new count, unchecked.
func (s *RSemaphore) Release(ctx context.Context, n int) error {
	return redissonSemRelease.Run(ctx, s.r.rdb, []string{s.name, s.channel()}, n, s.publishCmd()).Err()
}

// TrySetPermits is trySetPermits(n).
func (s *RSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	v, err := redissonSemSet.Run(ctx, s.r.rdb, []string{s.name, s.channel()}, n, s.publishCmd()).Int64()
	return v == 1, err
}

// AvailablePermits is availablePermits: GET, nil = 0.
func (s *RSemaphore) AvailablePermits(ctx context.Context) (int64, error) {
	v, err := s.r.rdb.Get(ctx, s.name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

var (
	// KEYS: name. ARGV: n.
	redissonSemAcquire = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return 1
end
return 0`)

	// KEYS: name, channel. ARGV: n, publish command.
	redissonSemRelease = redis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], v)
return v`)

	// KEYS: name, channel. ARGV: n, publish command.
	redissonSemSet = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
)
