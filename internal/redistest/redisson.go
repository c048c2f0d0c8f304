package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Redisson is a test double of a Redisson client's lock protocol, so tests
// can mix Redisson and rlock owners of one lock without a JVM. It models
// the observable behaviour of Redisson 4.7 (RLock and RFairLock: key
// names, hash fields, scores, replies, messages and the order of each
// script's steps) as documented in the project's REDISSON-NOTES.md; the
// Lua below is written here from those facts, not taken from Redisson.
//
// Modelled: acquire (EVAL_LONG and the boolean no-wait flavour), unlock
// with its request latch, forceUnlock, the blocking wait (subscribe, then
// retry on a message or after the returned TTL), the fair queue's
// cumulative scores (a joiner takes the tail's score, or now + PTTL, plus
// its wait; a grant subtracts the granted caller's wait from every queued
// score; a tryLock that gives up subtracts its wait from the waiters
// behind it), pruning heads whose score passed, the per-waiter channel,
// and the publish command (PUBLISH, or SPUBLISH as Redisson uses on a
// Redis 7+ cluster with shardedSubscriptionMode AUTO).
//
// Not modelled: the watchdog (use a lease), replica sync, read-write
// locks, and the JVM's thread ids (a thread is a number chosen by the
// test). One deliberate difference: where Redisson would re-poll at once
// on a returned TTL of 0 (a queued waiter of a free lock whose head is
// someone else), the double waits 1 ms.
type Redisson struct {
	rdb redis.UniversalClient
	// ID is the client UUID, the first half of every owner field.
	ID string
	// Sharded selects SPUBLISH and SSUBSCRIBE instead of PUBLISH and
	// SUBSCRIBE.
	Sharded bool
	// ThreadWaitTime is fairLockWaitTimeout: the wait a fair lock() uses
	// for its score. Default 5 min.
	ThreadWaitTime time.Duration
	// LatchTTL is how long an unlock's latch lives. Default 16 s.
	LatchTTL time.Duration

	waits atomic.Int64
}

// Waits returns how many times a blocked call of this client has started
// to wait (for a message or its TTL) after a failed attempt: a test knows
// a waiter is asleep once this grows.
func (r *Redisson) Waits() int64 { return r.waits.Load() }

// NewRedisson returns a Redisson double on rdb with a random client ID.
func NewRedisson(rdb redis.UniversalClient, sharded bool) *Redisson {
	return &Redisson{rdb: rdb, ID: uuid.NewString(), Sharded: sharded,
		ThreadWaitTime: 5 * time.Minute, LatchTTL: 16 * time.Second}
}

// RLock is a Redisson lock object used by one thread.
type RLock struct {
	r      *Redisson
	name   string
	thread int64
	fair   bool
}

// Lock returns the RLock called name as used by thread.
func (r *Redisson) Lock(name string, thread int64) *RLock {
	return &RLock{r: r, name: name, thread: thread}
}

// FairLock returns the RFairLock called name as used by thread.
func (r *Redisson) FairLock(name string, thread int64) *RLock {
	return &RLock{r: r, name: name, thread: thread, fair: true}
}

// ErrIllegalMonitorState is what Redisson's unlock throws when the thread
// does not hold the lock.
var ErrIllegalMonitorState = errors.New("attempt to unlock lock, not locked by current thread")

// Owner returns the owner field "<clientUUID>:<thread>".
func (l *RLock) Owner() string { return l.r.ID + ":" + strconv.FormatInt(l.thread, 10) }

func (l *RLock) publishCmd() string {
	if l.r.Sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// derived is Redisson's prefixName.
func derived(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

func (l *RLock) channel() string { return derived("redisson_lock__channel", l.name) }
func (l *RLock) queue() string   { return derived("redisson_lock_queue", l.name) }
func (l *RLock) zset() string    { return derived("redisson_lock_timeout", l.name) }

func (l *RLock) latch() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return derived("redisson_unlock_latch", l.name) + ":" + hex.EncodeToString(b)
}

func nowMs() int64 { return time.Now().UnixMilli() }

// wait is the per-call wait of a fair acquire: the tryLock wait if
// positive, else ThreadWaitTime.
func (l *RLock) fairWait(wait time.Duration) int64 {
	if wait > 0 {
		return wait.Milliseconds()
	}
	return l.r.ThreadWaitTime.Milliseconds()
}

// attempt runs the acquire script once: acquired, or the TTL to wait.
func (l *RLock) attempt(ctx context.Context, lease, wait time.Duration) (bool, int64, error) {
	var cmd *redis.Cmd
	if l.fair {
		cmd = redissonFairAcquire.Run(ctx, l.r.rdb, []string{l.name, l.queue(), l.zset()},
			lease.Milliseconds(), l.Owner(), l.fairWait(wait), nowMs())
	} else {
		cmd = redissonAcquire.Run(ctx, l.r.rdb, []string{l.name}, lease.Milliseconds(), l.Owner())
	}
	ttl, err := cmd.Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, ttl, err
}

// TryLockNow is tryLock() without arguments: one attempt that never queues.
func (l *RLock) TryLockNow(ctx context.Context, lease time.Duration) (bool, error) {
	if l.fair {
		err := redissonFairTry.Run(ctx, l.r.rdb, []string{l.name, l.queue(), l.zset()},
			lease.Milliseconds(), l.Owner(), l.fairWait(0), nowMs()).Err()
		if errors.Is(err, redis.Nil) {
			return true, nil
		}
		return false, err
	}
	ok, _, err := l.attempt(ctx, lease, 0)
	return ok, err
}

// Lock is lock(lease): it waits until acquired or ctx ends (then, for a
// fair lock, it leaves the queue as acquireFailed does).
func (l *RLock) Lock(ctx context.Context, lease time.Duration) error {
	ok, err := l.TryLock(ctx, -1, lease)
	if err == nil && !ok {
		err = ctx.Err()
	}
	return err
}

// TryLock is tryLock(wait, lease): it waits at most wait (wait < 0: until
// ctx ends) and reports whether it acquired; a fair waiter that gives up
// runs acquireFailed.
func (l *RLock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	// The first attempt; the loop below tries again once subscribed.
	ok, _, err := l.attempt(ctx, lease, wait)
	if ok || err != nil {
		return ok, err
	}
	ch := l.channel()
	if l.fair {
		ch += ":" + l.Owner()
	}
	var ps *redis.PubSub
	if l.r.Sharded {
		ps = l.r.rdb.SSubscribe(ctx, ch)
	} else {
		ps = l.r.rdb.Subscribe(ctx, ch)
	}
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return false, l.giveUp(err, wait)
	}
	msgs := ps.Channel()
	for {
		ok, ttl, err := l.attempt(ctx, lease, wait)
		if ok || err != nil {
			return ok, err
		}
		d := time.Duration(max(ttl, 1)) * time.Millisecond
		if wait >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return false, l.giveUp(nil, wait)
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		l.r.waits.Add(1)
		err = l.sleep(ctx, msgs, t)
		t.Stop()
		if err != nil {
			return false, l.giveUp(err, wait)
		}
	}
}

// sleep waits for an unlock message or t. Redisson decodes the lock
// channel's messages with its LongCodec (Long.valueOf: a payload that is
// not an integer is a decoding error) and acts on 0 (unlock) and 1 (read
// unlock) only; other integers are ignored.
func (l *RLock) sleep(ctx context.Context, msgs <-chan *redis.Message, t *time.Timer) error {
	for {
		select {
		case m := <-msgs:
			n, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil {
				return fmt.Errorf("redisson: LongCodec cannot decode %q on %s: %w", m.Payload, m.Channel, err)
			}
			if n == 0 || n == 1 {
				return nil
			}
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// giveUp runs acquireFailed for a fair lock and returns err.
func (l *RLock) giveUp(err error, wait time.Duration) error {
	if !l.fair {
		return err
	}
	ferr := redissonFairFailed.Run(context.Background(), l.r.rdb, []string{l.queue(), l.zset()},
		l.Owner(), l.fairWait(wait)).Err()
	if ferr != nil && !errors.Is(ferr, redis.Nil) {
		return errors.Join(err, ferr)
	}
	return err
}

// Unlock releases one hold; ErrIllegalMonitorState if the thread holds none.
func (l *RLock) Unlock(ctx context.Context) error {
	var cmd *redis.Cmd
	if l.fair {
		cmd = redissonFairRelease.Run(ctx, l.r.rdb, []string{l.name, l.queue(), l.zset(), l.channel(), l.latch()},
			"0", (30 * time.Second).Milliseconds(), l.Owner(), nowMs(), l.publishCmd(), l.r.LatchTTL.Milliseconds())
	} else {
		cmd = redissonRelease.Run(ctx, l.r.rdb, []string{l.name, l.channel(), l.latch()},
			"0", (30 * time.Second).Milliseconds(), l.Owner(), l.publishCmd(), l.r.LatchTTL.Milliseconds())
	}
	err := cmd.Err()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: %s", ErrIllegalMonitorState, l.Owner())
	}
	return err
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter.
func (l *RLock) ForceUnlock(ctx context.Context) (bool, error) {
	var cmd *redis.Cmd
	if l.fair {
		cmd = redissonFairForce.Run(ctx, l.r.rdb, []string{l.name, l.queue(), l.zset(), l.channel()},
			"0", nowMs(), l.publishCmd())
	} else {
		cmd = redissonForce.Run(ctx, l.r.rdb, []string{l.name, l.channel()}, "0", l.publishCmd())
	}
	n, err := cmd.Int64()
	return n == 1, err
}

// The scripts, written from the step lists in REDISSON-NOTES.md §1 and §3.
var (
	// KEYS: name. ARGV: lease, owner.
	redissonAcquire = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return nil
end
return redis.call('PTTL', KEYS[1])`)

	// KEYS: name, channel, latch. ARGV: message, lease, owner, publish command, latch TTL.
	redissonRelease = redis.NewScript(`
local done = redis.call('GET', KEYS[3])
if done then return tonumber(done) end
if redis.call('HEXISTS', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('HINCRBY', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[3], 0, 'PX', ARGV[5])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 1, 'PX', ARGV[5])
return 1`)

	// KEYS: name, channel. ARGV: message, publish command.
	redissonForce = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)

	// The fair prune: drop heads whose score passed (or that have none).
	redissonPrune = `
local function prune(now)
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head then return end
    local s = redis.call('ZSCORE', KEYS[3], head)
    if s and tonumber(s) > now then return end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
  end
end
`
	// grant is step 2 and 3 of the fair acquire; true when acquired.
	redissonFairGrant = redissonPrune + `
local function grant(lease, owner, wait)
  local head = redis.call('LINDEX', KEYS[2], 0)
  if redis.call('EXISTS', KEYS[1]) == 0 and (not head or head == owner) then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], owner)
    for i, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
      redis.call('ZINCRBY', KEYS[3], -tonumber(wait), m)
    end
    redis.call('HSET', KEYS[1], owner, 1)
    redis.call('PEXPIRE', KEYS[1], lease)
    return true
  end
  if redis.call('HEXISTS', KEYS[1], owner) == 1 then
    redis.call('HINCRBY', KEYS[1], owner, 1)
    redis.call('PEXPIRE', KEYS[1], lease)
    return true
  end
  return false
end
`
	// KEYS: name, queue, zset. ARGV: lease, owner, wait, now.
	redissonFairAcquire = redis.NewScript(redissonFairGrant + `
local now = tonumber(ARGV[4])
prune(now)
if grant(ARGV[1], ARGV[2], ARGV[3]) then return nil end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  return math.max(0, redis.call('PTTL', KEYS[1]))
end
local tail = redis.call('LINDEX', KEYS[2], -1)
local ttl
local ts = tail and tail ~= ARGV[2] and redis.call('ZSCORE', KEYS[3], tail)
if ts then
  ttl = tonumber(ts) - now
else
  ttl = redis.call('PTTL', KEYS[1])
end
if redis.call('ZADD', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
end
return ttl`)

	// KEYS: name, queue, zset. ARGV: lease, owner, wait, now. nil: acquired; 1: not.
	redissonFairTry = redis.NewScript(redissonFairGrant + `
prune(tonumber(ARGV[4]))
if grant(ARGV[1], ARGV[2], ARGV[3]) then return nil end
return 1`)

	// KEYS: queue, zset. ARGV: owner, wait.
	redissonFairFailed = redis.NewScript(`
local pos = nil
local q = redis.call('LRANGE', KEYS[1], 0, -1)
for i, w in ipairs(q) do
  if w == ARGV[1] then pos = i end
end
if pos then
  for i = pos + 1, #q do
    redis.call('ZINCRBY', KEYS[2], -tonumber(ARGV[2]), q[i])
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('LREM', KEYS[1], 0, ARGV[1])
return 0`)

	// KEYS: name, queue, zset, channel prefix, latch.
	// ARGV: message, lease, owner, now, publish command, latch TTL.
	redissonFairRelease = redis.NewScript(redissonPrune + `
local done = redis.call('GET', KEYS[5])
if done then return tonumber(done) end
prune(tonumber(ARGV[4]))
local function notifyHead()
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  notifyHead()
  redis.call('SET', KEYS[5], 1, 'PX', ARGV[6])
  return 1
end
if redis.call('HEXISTS', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('HINCRBY', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[5], 0, 'PX', ARGV[6])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], 1, 'PX', ARGV[6])
notifyHead()
return 1`)

	// KEYS: name, queue, zset, channel prefix. ARGV: message, now, publish command.
	redissonFairForce = redis.NewScript(redissonPrune + `
prune(tonumber(ARGV[2]))
if redis.call('DEL', KEYS[1]) == 1 then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1]) end
  return 1
end
return 0`)
)

// Scores returns the fair queue of name as Redisson sees it: owner fields
// in queue order with their scores (epoch ms), and the server's now.
func Scores(ctx context.Context, rdb redis.UniversalClient, name string) (owners []string, scores []float64, err error) {
	owners, err = rdb.LRange(ctx, derived("redisson_lock_queue", name), 0, -1).Result()
	if err != nil {
		return nil, nil, err
	}
	for _, o := range owners {
		s, err := rdb.ZScore(ctx, derived("redisson_lock_timeout", name), o).Result()
		if errors.Is(err, redis.Nil) {
			s, err = -1, nil
		}
		if err != nil {
			return nil, nil, err
		}
		scores = append(scores, s)
	}
	return owners, scores, nil
}
