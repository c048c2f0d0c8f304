package core

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// replyError is an error reply as go-redis gives it (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestScriptErrorAfterWriteIsUnknownOutcome: Redis keeps what a script
// wrote before a redis.call or a Lua error stopped it, and the client read
// every such error reply (but the cluster's non-local-key one) as a script
// that had not run: a grant made before the error stayed on the server
// unreported, a release made before it left the handle holding. Each
// backend's own replies are read here: an error raised inside a script is
// an unknown outcome and final; the script's own refusal (returned with
// redis.error_reply) and a call the server refused before the script ran
// are known outcomes.
func TestScriptErrorAfterWriteIsUnknownOutcome(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		hash, str := "{"+name+"}:h", "{"+name+"}:s"
		require.NoError(t, rdb.Set(ctx, str, "x", 0).Err())
		for _, tc := range []struct {
			name, script string
			inPart       bool
		}{
			{"wrongtype-after-write", "redis.call('HSET', KEYS[1], 'a', 1); redis.call('RPUSH', KEYS[2], 'x')", true},
			{"not-an-integer-after-write", "redis.call('HSET', KEYS[1], 'b', 1); redis.call('INCR', KEYS[2])", true},
			{"lua-error-after-write", "redis.call('HSET', KEYS[1], 'c', 1); local x; return x + 1", true},
			{"own-refusal", "return redis.error_reply('WRONGTYPE not a count')", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := rdb.Eval(ctx, tc.script, []string{hash, str}).Err()
				require.Error(t, err)
				require.True(t, isReply(err), "%v", err)
				require.Equal(t, tc.inPart, ranInPart(err), "%v", err)
				require.Equal(t, tc.inPart, unknownOutcome(fmt.Errorf("rlock: acquiring: %w", err)), "%v", err)
				require.False(t, transient(err), "a final error taken for one to try again: %v", err)
			})
		}
		// The writes before the errors stayed (the reason for all this).
		require.Equal(t, map[string]string{"a": "1", "b": "1", "c": "1"}, rdb.HGetAll(ctx, hash).Val())
		// A call Redis refuses before the script runs.
		require.NoError(t, rdb.HSet(ctx, hash, "d", 1).Err())
		err := rdb.EvalSha(ctx, "0123456789012345678901234567890123456789", []string{hash}).Err()
		require.Error(t, err)
		require.False(t, unknownOutcome(err), "%v", err)
	})
}

// TestScriptErrorClassesRedisRaisesBeforeAWrite: Redis 7 raises, inside a
// script, some errors only at its first write (out of memory, a read-only
// replica, a failed save, too few replicas): nothing ran. The cluster's
// non-local-key error can come after writes and passes with the slot's
// migration: unknown and transient.
func TestScriptErrorClassesRedisRaisesBeforeAWrite(t *testing.T) {
	const tail = " script: 0123456789012345678901234567890123456789, on @user_script:12."
	for _, tc := range []struct {
		reply                    string
		inPart, unknown, transit bool
	}{
		{"OOM command not allowed when used memory > 'maxmemory'." + tail, false, false, false},
		{"READONLY You can't write against a read only replica." + tail, false, false, true},
		{"MISCONF Errors writing to the AOF file: No space left on device" + tail, false, false, false},
		{"NOREPLICAS Not enough good replicas to write." + tail, false, false, true},
		{"ERR Script attempted to access a non local key in a cluster node" + tail, true, true, true},
		{"WRONGTYPE Operation against a key holding the wrong kind of value" + tail, true, true, false},
		{"ERR user_script:3: attempt to compare nil with number" + tail, true, true, false},
		{"ERR Error running script (call to f_0123): @user_script:3: WRONGTYPE Operation against a key", true, true, false},
		{"WRONGTYPE semaphore counter is not an integer", false, false, false},
	} {
		err := replyError(tc.reply)
		require.Equal(t, tc.inPart, ranInPart(err), tc.reply)
		require.Equal(t, tc.unknown, unknownOutcome(err), tc.reply)
		require.Equal(t, tc.transit, transient(err), tc.reply)
	}
}
