package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RLatch is the double of a Redisson RCountDownLatch, written from the
// facts in REDISSON-SYNC-NOTES.md §3: the count in the key named by the
// latch, the channel "redisson_countdownlatch__channel__{name}", "1"
// published on trySetCount and delete, "0" when countDown reaches zero;
// await waits for "0" with no poll, as Redisson does.
type RLatch struct {
	r    *Redisson
	name string
}

// CountDownLatch returns the RCountDownLatch called name.
func (r *Redisson) CountDownLatch(name string) *RLatch { return &RLatch{r: r, name: name} }

func (l *RLatch) channel() string { return "redisson_countdownlatch__channel__{" + l.name + "}" }

func (l *RLatch) publishCmd() string {
	if l.r.Sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// TrySetCount is trySetCount(n).
func (l *RLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	r, err := redissonLatchTrySet.Run(ctx, l.r.rdb, []string{l.name, l.channel()}, "1", n, l.publishCmd()).Int64()
	return r == 1, err
}

// CountDown is countDown().
func (l *RLatch) CountDown(ctx context.Context) error {
	err := redissonLatchCountDown.Run(ctx, l.r.rdb, []string{l.name, l.channel()}, "0", l.publishCmd()).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Count is getCount().
func (l *RLatch) Count(ctx context.Context) (int64, error) {
	n, err := l.r.rdb.Get(ctx, l.name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Delete is delete().
func (l *RLatch) Delete(ctx context.Context) (bool, error) {
	r, err := redissonLatchDelete.Run(ctx, l.r.rdb, []string{l.name, l.channel()}, "1", l.publishCmd()).Int64()
	return r == 1, err
}

// Await is await(): if the count is 0 it returns; otherwise it subscribes
// and, while the count is positive, waits for a "0" message (no poll: a
// lost "0" leaves it waiting until ctx ends).
func (l *RLatch) Await(ctx context.Context) error {
	if n, err := l.Count(ctx); err != nil || n == 0 {
		return err
	}
	var ps *redis.PubSub
	if l.r.Sharded {
		ps = l.r.rdb.SSubscribe(ctx, l.channel())
	} else {
		ps = l.r.rdb.Subscribe(ctx, l.channel())
	}
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return err
	}
	msgs := ps.Channel()
	for {
		n, err := l.Count(ctx)
		if err != nil || n <= 0 {
			return err
		}
		l.r.waits.Add(1)
		if err := waitZero(ctx, msgs); err != nil {
			return err
		}
	}
}

// waitZero waits for a "0" message (LongCodec: a payload that is not an
// integer is a decoding error; "1" re-closes the latch).
func waitZero(ctx context.Context, msgs <-chan *redis.Message) error {
	for {
		select {
		case m := <-msgs:
			n, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil {
				return fmt.Errorf("redisson: LongCodec cannot decode %q on %s: %w", m.Payload, m.Channel, err)
			}
			if n == 0 {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// The latch scripts, from the step lists in REDISSON-SYNC-NOTES.md §3.
var (
	// KEYS: name, channel. ARGV: new-count message, count, publish command.
	redissonLatchTrySet = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return 1
end
return 0`)

	// KEYS: name, channel. ARGV: zero-count message, publish command.
	redissonLatchCountDown = redis.NewScript(`
local v = redis.call('DECR', KEYS[1])
if v <= 0 then redis.call('DEL', KEYS[1]) end
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
return nil`)

	// KEYS: name, channel. ARGV: new-count message, publish command.
	redissonLatchDelete = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
)
