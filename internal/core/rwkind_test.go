package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
)

// TestParseUpgradeRefusal: the write script's {-2, 0} is its own answer,
// not a refusal to wait on and not a loss.
func TestParseUpgradeRefusal(t *testing.T) {
	rep, ok := parseAcquireReply([]int64{-2, 0})
	require.True(t, ok)
	require.Equal(t, upgradeRefused, rep.kind)
	_, ok = parseAcquireReply([]int64{-3, 0})
	require.False(t, ok)
}

// TestRWKindsSeparateFields: an owner's write holds count under
// "<owner>:write", its read holds under the owner itself, and the writer's
// acquire names both (to refuse an upgrade); the writer's blocking
// attempts join the writer-wait set and retry every third of its timeout.
func TestRWKindsSeparateFields(t *testing.T) {
	cfg := LockConfig{WriterWait: 9 * time.Second}
	r, w := newKind("n", LockConfig{Kind: Read}), newKind("n", LockConfig{Kind: Write, WriterWait: cfg.WriterWait})
	require.Equal(t, "c:#1", r.field("c:#1"))
	require.Equal(t, "c:#1:write", w.field("c:#1"))

	call := w.acquire("c:#1:write", 0, time.Second, joinQueue, "c", registration{})
	require.Same(t, lua.RWWriteLock, call.script)
	require.Equal(t, []any{int64(1000), "c:#1:write", int64(0), "0", "c:#1", int64(9000), "1"}, call.args)
	require.Equal(t, 3*time.Second, w.waitPlan("c:#1:write").poll)
	require.True(t, w.waitPlan("").queue)
	require.True(t, w.waitPlan("").prefer, "the last reader's release is for a writer")
	require.False(t, r.waitPlan("").prefer)
	_, leaves := w.leave("c:#1:write", "c")
	require.True(t, leaves)
	_, leaves = r.leave("c:#1", "c")
	require.False(t, leaves)
	require.Equal(t, noBound, r.waitPlan("c:#1").poll)
	require.Equal(t, r.waitPlan("").channel, w.waitPlan("").channel)
}

// TestParseRWState reads rw_state.lua's flat reply, and rejects a short
// or mistyped one.
func TestParseRWState(t *testing.T) {
	s, ok := parseRWState([]any{int64(1000), "read", int64(500), int64(2),
		"c:2", int64(1), int64(300), "c:1:write", int64(2), int64(500),
		int64(1), "d:1:write", int64(4000)})
	require.True(t, ok)
	require.Equal(t, "read", s.Mode)
	require.Equal(t, []RWHolder{{Field: "c:2", Holds: 1, TTL: 300 * time.Millisecond}}, s.Readers)
	require.Equal(t, &RWHolder{Field: "c:1:write", Holds: 2, TTL: 500 * time.Millisecond}, s.Writer)
	require.Equal(t, []QueuedWaiter{{Owner: "d:1:write", Deadline: time.UnixMilli(4000)}}, s.Waiting)

	for _, bad := range [][]any{nil, {int64(1), "", int64(-2)}, {int64(1), "", int64(-2), int64(1), "x"},
		{int64(1), "", int64(-2), int64(0), int64(0), "extra"}, {"1", "", int64(-2), int64(0), int64(0)}} {
		_, ok := parseRWState(bad)
		require.False(t, ok, "%v", bad)
	}
}
