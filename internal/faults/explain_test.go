package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/history"
)

// This file explains a failed exclusion check: for each overlap it shows
// what both owners did around it (every call of theirs, both sides, with
// its times, outcome and error) and the notes taken meanwhile (fault
// steps, and what a spy read of every node, when the run has one), so
// that a single failure tells its cause.

// note is an event of a run worth showing beside the history: a fault's
// step, or what a spy saw. At is a Recorder time.
type note struct {
	at   int64
	text string
}

// notebook is a run's notes; the zero value is ready.
type notebook struct {
	mu    sync.Mutex
	notes []note
}

func (nb *notebook) add(at int64, format string, args ...any) {
	nb.mu.Lock()
	nb.notes = append(nb.notes, note{at: at, text: fmt.Sprintf(format, args...)})
	nb.mu.Unlock()
}

// between returns the notes taken in [lo, hi], in time order.
func (nb *notebook) between(lo, hi int64) []note {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	var res []note
	for _, n := range nb.notes {
		if lo <= n.at && n.at <= hi {
			res = append(res, n)
		}
	}
	slices.SortStableFunc(res, func(a, b note) int { return int(a.at - b.at) })
	return res
}

// note records an event of the run at the Recorder's present.
func (r *rig) note(format string, args ...any) { r.notes.add(r.rec.Now(), format, args...) }

// explainWindow is how far around an overlap the explanation shows the
// notes; opsWindow, how far before it the owners' calls (a belief may
// have started from a count read that followed an earlier call).
const (
	explainWindow = 30 * time.Millisecond
	opsWindow     = 300 * time.Millisecond
)

// maxExplainLines bounds one overlap's explanation.
const maxExplainLines = 400

// explainRWOverlap describes overlap o of the history ops: both owners'
// calls around it and the notes taken meanwhile.
func (r *rig) explainRWOverlap(ops []history.Op, o history.RWOverlap) string {
	lo := min(o.A.Start, o.B.Start) - int64(explainWindow)
	hi := max(o.A.Start, o.B.Start)
	for _, e := range []int64{o.A.End, o.B.End} {
		if e != history.Forever {
			hi = max(hi, e)
		}
	}
	hi += int64(explainWindow)
	var entries []note
	add := func(at int64, s string) { entries = append(entries, note{at: at, text: s}) }
	for _, op := range ops {
		if op.Owner != o.A.Owner && op.Owner != o.B.Owner && op.Kind != history.Lapse && op.Kind != history.Wipe {
			continue
		}
		if op.Call > hi || op.Return < lo-int64(opsWindow-explainWindow) {
			continue
		}
		add(op.Call, "op: "+op.String())
	}
	for _, n := range r.notes.between(lo, hi) {
		add(n.at, n.text)
	}
	slices.SortStableFunc(entries, func(a, b note) int { return int(a.at - b.at) })
	var lines []string
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf("  %12v %s", time.Duration(e.at), e.text))
	}
	if len(lines) > maxExplainLines {
		lines = append(lines[:maxExplainLines], fmt.Sprintf("  ... and %d more lines", len(lines)-maxExplainLines))
	}
	return fmt.Sprintf("%v\n  what owners %d and %d did, and the notes, from %v to %v:\n%s",
		o, o.A.Owner, o.B.Owner, time.Duration(lo), time.Duration(hi), strings.Join(lines, "\n"))
}

// slotSpy reads, every pause, what every master of a cluster has of the
// lock's slot — the keys there (CLUSTER GETKEYSINSLOT) and the lock hash
// with its PTTL, asked with ASKING so that a node importing the slot
// answers too — and notes each master's view whenever it changes. Two
// masters each showing a lock hash is a split lock.
func (r *rig) slotSpy(addrs []string, stop <-chan struct{}, pause time.Duration) {
	slot := base.Slot(r.name)
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, PoolSize: 1, MaxRetries: -1, Protocol: 2})
		defer clients[i].Close()
	}
	last := make([]string, len(addrs))
	ctx := context.Background()
	for !closed(stop) {
		for i, c := range clients {
			var keys *redis.StringSliceCmd
			var hash *redis.MapStringStringCmd
			var pttl *redis.DurationCmd
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				keys = p.ClusterGetKeysInSlot(ctx, slot, 100)
				p.Do(ctx, "asking")
				hash = p.HGetAll(ctx, r.name)
				p.Do(ctx, "asking")
				pttl = p.PTTL(ctx, r.name)
				return nil
			})
			at := r.rec.Now()
			var view string
			switch {
			case keys.Err() != nil:
				view = "keys: " + keys.Err().Error()
			case hash.Err() != nil:
				view = fmt.Sprintf("keys %v; hash: %v", shortKeys(r.name, keys.Val()), hash.Err())
			default:
				view = fmt.Sprintf("keys %v; hash %v pttl %v", shortKeys(r.name, keys.Val()), sortedHash(hash.Val()), pttl.Val())
			}
			if err != nil && keys.Err() == nil && hash.Err() == nil && pttl.Err() != nil {
				view += " (" + pttl.Err().Error() + ")"
			}
			if view != last[i] {
				last[i] = view
				r.notes.add(at, "spy %s: %s", addrs[i], view)
			}
		}
		if sleepOrStop(pause, stop) {
			return
		}
	}
}

// shortKeys lists keys sorted, with the lock name shortened to "N".
func shortKeys(name string, keys []string) string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	for i, k := range keys {
		k = strings.ReplaceAll(k, "{"+name+"}", "{N}")
		keys[i] = strings.ReplaceAll(k, name, "N")
	}
	return "[" + strings.Join(keys, " ") + "]"
}

func sortedHash(h map[string]string) string {
	var parts []string
	for f, v := range h {
		parts = append(parts, f+"="+v)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// TestExplainRWOverlap: the explanation of an overlap lists both owners'
// calls and the notes in time order, and the exclusion check still finds
// a writer and a reader holding at once.
func TestExplainRWOverlap(t *testing.T) {
	ms := func(n int) int64 { return int64(time.Duration(n) * time.Millisecond) }
	ops := []history.Op{
		{Owner: 0, Side: history.Write, Kind: history.Lock, Outcome: history.OK, Call: 0, Return: ms(1)},
		{Owner: 1, Side: history.Read, Kind: history.Lock, Outcome: history.OK, Call: ms(2), Return: ms(3)},
		{Owner: 0, Side: history.Write, Kind: history.Unlock, Outcome: history.OK, Call: ms(5), Return: ms(6)},
		{Owner: 1, Side: history.Read, Kind: history.Unlock, Outcome: history.OK, Call: ms(7), Return: ms(8)},
		{Owner: 2, Side: history.Read, Kind: history.Lock, Outcome: history.NotObtained, Call: ms(2), Return: ms(3)},
	}
	overlaps := history.CheckRWExclusive(ops)
	require.Len(t, overlaps, 1)
	r := &rig{}
	r.notes.add(ms(4), "migration 1: marked")
	got := r.explainRWOverlap(ops, overlaps[0])
	t.Log(got)
	lock := strings.Index(got, "owner 1 Lock read -> ok")
	note := strings.Index(got, "migration 1: marked")
	unlock := strings.Index(got, "owner 0 Unlock write -> ok")
	require.True(t, lock >= 0 && note > lock && unlock > note, "the calls and the note in time order")
	require.NotContains(t, got, "owner 2", "only the two owners' calls")
}
