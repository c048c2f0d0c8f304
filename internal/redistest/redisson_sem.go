package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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

// RExpirableSemaphore is the double's RPermitExpirableSemaphore (notes
// §2): the counter, "{name}:timeout" with raw 16-byte IDs scored by expiry
// in epoch ms of this client's clock (or the no-lease sentinel), and the
// reclaim block in acquire.
type RExpirableSemaphore struct {
	r    *Redisson
	name string
}

// ExpirableSemaphore returns the RPermitExpirableSemaphore called name.
func (r *Redisson) ExpirableSemaphore(name string) *RExpirableSemaphore {
	return &RExpirableSemaphore{r: r, name: name}
}

// RedissonNoLease is Redisson's score of a permit without a lease.
const RedissonNoLease = 922337203685477

func (s *RExpirableSemaphore) timeout() string {
	if strings.Contains(s.name, "{") {
		return s.name + ":timeout"
	}
	return "{" + s.name + "}:timeout"
}

func (s *RExpirableSemaphore) publishCmd() string { return (&RSemaphore{r: s.r}).publishCmd() }

// try runs the acquire script once: the permit's ID when acquired, else
// the nearest expiry it reported (epoch ms; 0: none).
func (s *RExpirableSemaphore) try(ctx context.Context, lease time.Duration) (string, bool, int64, error) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	now := nowMs()
	expiry := int64(RedissonNoLease)
	if lease >= 0 {
		expiry = now + lease.Milliseconds()
	}
	res, err := redissonExpAcquire.Run(ctx, s.r.rdb, []string{s.name, s.timeout(), derived("redisson_sc", s.name)},
		1, expiry, now, RedissonNoLease, s.publishCmd(), raw).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, 0, nil
	}
	if err != nil {
		return "", false, 0, err
	}
	if res == "OK" {
		return hex.EncodeToString(raw), true, 0, nil
	}
	hint, _ := res.(string)
	next, _ := strconv.ParseInt(strings.TrimPrefix(hint, ":"), 10, 64)
	return "", false, next, nil
}

// Acquire is acquire(lease) (lease < 0: no lease): try, subscribe, then
// try again after each wake-up. As Redisson's listener does, a message
// wakes the waiter only when its int value (the low 32 bits of the long)
// is positive; the waiter also wakes by itself at the nearest expiry the
// refused try reported, and never otherwise (no poll).
func (s *RExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	if id, ok, _, err := s.try(ctx, lease); ok || err != nil {
		return id, err
	}
	var ps *redis.PubSub
	if s.r.Sharded {
		ps = s.r.rdb.SSubscribe(ctx, derived("redisson_sc", s.name))
	} else {
		ps = s.r.rdb.Subscribe(ctx, derived("redisson_sc", s.name))
	}
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return "", err
	}
	msgs := ps.Channel()
	for {
		id, ok, next, err := s.try(ctx, lease)
		if ok || err != nil {
			return id, err
		}
		s.r.waits.Add(1)
		var expiry <-chan time.Time
		if next > 0 {
			expiry = time.After(time.Until(time.UnixMilli(next)))
		}
	wait:
		for {
			select {
			case m := <-msgs:
				v, err := strconv.ParseInt(m.Payload, 10, 64)
				if err != nil {
					return "", fmt.Errorf("redisson: LongCodec cannot decode %q on %s: %w", m.Payload, m.Channel, err)
				}
				if int32(v) > 0 {
					break wait
				}
			case <-expiry:
				break wait
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
}

// TryAcquire is tryAcquire(lease) without a wait (lease < 0: no lease);
// it returns the permit's ID when acquired.
func (s *RExpirableSemaphore) TryAcquire(ctx context.Context, lease time.Duration) (string, bool, error) {
	id, ok, _, err := s.try(ctx, lease)
	return id, ok, err
}

// Release is release(id): false when the permit was not held (or had
// expired).
func (s *RExpirableSemaphore) Release(ctx context.Context, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	n, err := redissonExpRelease.Run(ctx, s.r.rdb, []string{s.name, derived("redisson_sc", s.name), s.timeout()},
		raw, 1, nowMs(), s.publishCmd()).Int64()
	return n == 1, err
}

var (
	// KEYS: name, timeout, channel. ARGV: k, expiry, now, sentinel, publish command, ids.
	redissonExpAcquire = redis.NewScript(`
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], 0, ARGV[3], 'LIMIT', 0, ARGV[1])
if #gone > 0 then
  redis.call('ZREM', KEYS[2], unpack(gone))
  local v = redis.call('INCRBY', KEYS[1], #gone)
  if v > 0 then redis.call(ARGV[5], KEYS[3], v) end
end
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local k = tonumber(ARGV[1])
if v >= k then
  redis.call('DECRBY', KEYS[1], k)
  for i = 6, #ARGV do redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  return 'OK'
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] ~= nil and first[2] ~= ARGV[4] then return ':' .. first[2] end
return nil`)

	// KEYS: name, channel, timeout. ARGV: id, 1, now, publish command.
	redissonExpRelease = redis.NewScript(`
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then return 0 end
local v = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], v)
if tonumber(s) <= tonumber(ARGV[3]) then return 0 end
return 1`)
)
