package history

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// h builds a history from (owner, kind, outcome, call, return) rows.
func h(rows ...[5]int) []Op {
	ops := make([]Op, len(rows))
	for i, r := range rows {
		ops[i] = Op{Owner: r[0], Kind: Kind(r[1]), Outcome: Outcome(r[2]), Call: int64(r[3]), Return: int64(r[4])}
	}
	return ops
}

// v sets the Value of the last op of ops (a Count read, a ForceUnlock
// reply).
func v(ops []Op, value int) []Op {
	ops[len(ops)-1].Value = value
	return ops
}

// cat joins histories.
func cat(parts ...[]Op) []Op {
	var res []Op
	for _, p := range parts {
		res = append(res, p...)
	}
	return res
}

var (
	cnt, force                     = int(Count), int(ForceUnlock)
	lk, try, un, lost, lapse, wipe = int(Lock), int(TryLock), int(Unlock), int(Lost), int(Lapse), int(Wipe)
	ok, notObt, notHeld, unknown   = int(OK), int(NotObtained), int(NotHeld), int(Unknown)
)

func TestClassify(t *testing.T) {
	other := errors.New("i/o timeout")
	require.Equal(t, OK, Classify(Lock, nil))
	require.Equal(t, NotObtained, Classify(TryLock, fmt.Errorf("x: %w", rlock.ErrNotObtained)))
	require.Equal(t, Unknown, Classify(Lock, fmt.Errorf("x: %w", rlock.ErrNotObtained)), "Lock never refuses")
	require.Equal(t, NotHeld, Classify(Unlock, fmt.Errorf("x: %w", rlock.ErrNotHeld)))
	require.Equal(t, Unknown, Classify(Unlock, other))
	require.Equal(t, Unknown, Classify(TryLock, other))
}

func TestLinearizable(t *testing.T) {
	cases := []struct {
		name  string
		ops   []Op
		legal bool
	}{
		{"sequential handover", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, un, ok, 2, 3},
			[5]int{1, lk, ok, 4, 5}, [5]int{1, un, ok, 6, 7}), true},
		{"two holders", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{1, lk, ok, 2, 3}), false},
		{"concurrent lock calls, one waits", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{1, lk, ok, 0, 10}, [5]int{0, un, ok, 5, 6}), true},
		{"re-entry counts", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, try, ok, 2, 3}, [5]int{0, un, ok, 4, 5},
			[5]int{1, try, notObt, 6, 7}, [5]int{0, un, ok, 8, 9}, [5]int{1, try, ok, 10, 11}), true},
		{"released one hold too many", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, un, ok, 2, 3}, [5]int{0, un, ok, 4, 5}), false},
		{"not held while held", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, un, notHeld, 2, 3}), false},
		{"refused while free", h(
			[5]int{1, try, notObt, 0, 1}), false},
		{"non-owner unlock refused", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{1, un, notHeld, 2, 3}, [5]int{1, un, ok, 4, 5}), false},
		{"unknown acquire that took effect", h(
			[5]int{0, lk, unknown, 0, 1}, [5]int{1, try, notObt, 2, 3}), true},
		{"unknown acquire that did not", h(
			[5]int{0, lk, unknown, 0, 1}, [5]int{1, try, ok, 2, 3}), true},
		{"unknown acquire cannot explain a second holder", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{1, lk, unknown, 2, 3}, [5]int{2, lk, ok, 4, 5}), false},
		{"unknown release taking effect late", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, un, unknown, 2, 3},
			[5]int{1, try, notObt, 4, 5}, [5]int{1, lk, ok, 6, 7}), true},
		{"lapse frees a dead holder", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, lapse, unknown, 2, 0}, [5]int{1, lk, ok, 3, 4}), true},
		{"no grant before the lapse", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{1, lk, ok, 2, 3}, [5]int{0, lapse, unknown, 4, 0}), false},
		{"lapse of any owner", h(
			[5]int{3, lk, ok, 0, 1}, [5]int{-1, lapse, unknown, 2, 5}, [5]int{1, lk, ok, 3, 6}), true},
		{"wipe frees everything", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, lk, ok, 2, 3}, [5]int{-1, wipe, ok, 4, 6},
			[5]int{1, lk, ok, 7, 8}, [5]int{0, un, notHeld, 9, 10}), true},
		{"unknown release pinned by a count read; the next release frees", cat(
			h([5]int{0, lk, ok, 0, 1}, [5]int{0, lk, ok, 2, 3}, [5]int{0, un, unknown, 4, 5}),
			v(h([5]int{0, cnt, ok, 6, 7}), 1),
			h([5]int{0, un, ok, 8, 9}, [5]int{1, try, ok, 10, 11})), true},
		{"the release after a lost reply mistaken for its re-send", cat(
			h([5]int{0, lk, ok, 0, 1}, [5]int{0, lk, ok, 2, 3}, [5]int{0, un, unknown, 4, 5}),
			v(h([5]int{0, cnt, ok, 6, 7}), 1),
			h([5]int{0, un, ok, 8, 9}, [5]int{1, try, notObt, 10, 11})), false},
		{"unknown re-entry that took effect, pinned", cat(
			h([5]int{0, lk, ok, 0, 1}, [5]int{0, try, unknown, 2, 3}),
			v(h([5]int{0, cnt, ok, 4, 5}), 2),
			h([5]int{0, try, ok, 6, 7}),
			v(h([5]int{0, cnt, ok, 8, 9}), 3)), true},
		{"the re-entry after a lost reply mistaken for its re-send", cat(
			h([5]int{0, lk, ok, 0, 1}, [5]int{0, try, unknown, 2, 3}),
			v(h([5]int{0, cnt, ok, 4, 5}), 2),
			h([5]int{0, try, ok, 6, 7}),
			v(h([5]int{0, cnt, ok, 8, 9}), 2)), false},
		{"another owner counts nothing", cat(h([5]int{0, lk, ok, 0, 1}), v(h([5]int{1, cnt, ok, 2, 3}), 0)), true},
		{"another owner counts a hold", cat(h([5]int{0, lk, ok, 0, 1}), v(h([5]int{1, cnt, ok, 2, 3}), 1)), false},
		{"force unlock of a held lock", cat(
			h([5]int{0, lk, ok, 0, 1}), v(h([5]int{2, force, ok, 2, 3}), 1),
			h([5]int{1, try, ok, 4, 5}, [5]int{0, un, notHeld, 6, 7})), true},
		{"force unlock of a free lock deletes nothing", v(h([5]int{2, force, ok, 0, 1}), 0), true},
		{"force unlock deleting a lock while it was free", cat(
			v(h([5]int{2, force, ok, 0, 1}), 1), h([5]int{1, try, ok, 2, 3})), false},
		{"force unlock of a held lock cannot find it free", cat(
			h([5]int{0, lk, ok, 0, 1}), v(h([5]int{2, force, ok, 2, 3}), 0)), false},
		{"force unlock with an unknown outcome", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{2, force, unknown, 2, 3}, [5]int{1, try, ok, 4, 5}), true},
		{"lost observations are not calls", h(
			[5]int{0, lk, ok, 0, 1}, [5]int{0, lost, ok, 2, 2}, [5]int{1, try, notObt, 3, 4}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				if tc.ops[i].Kind == Lapse {
					tc.ops[i].Return = Forever
				}
			}
			r := CheckLinearizable(tc.ops, -1, 10*time.Second)
			if r.Visualization != "" {
				_ = os.Remove(r.Visualization)
			}
			if tc.legal {
				require.Equal(t, porcupine.Ok, r.Verdict)
			} else {
				require.Equal(t, porcupine.Illegal, r.Verdict)
				require.NotEmpty(t, r.Visualization, "a visualization was written")
			}
		})
	}
}

func TestCheckExclusive(t *testing.T) {
	// Owner 0 holds [1, 4] (re-entered once); owner 1 from 5; owner 2 is
	// told it lost the lock at 9, and owner 1 holds until 12.
	ops := h(
		[5]int{0, lk, ok, 0, 1}, [5]int{0, lk, ok, 2, 3}, [5]int{0, un, ok, 3, 4}, [5]int{0, un, ok, 4, 5},
		[5]int{1, lk, ok, 0, 5}, [5]int{1, un, unknown, 12, 13}, [5]int{1, un, ok, 13, 14},
	)
	require.Empty(t, CheckExclusive(ops))
	require.Equal(t, []Belief{{0, 1, 4}, {1, 5, 12}}, Beliefs(ops))

	bad := append(ops, h([5]int{2, try, ok, 6, 7}, [5]int{2, lost, ok, 9, 9})...)
	got := CheckExclusive(bad)
	require.Len(t, got, 1)
	require.Equal(t, Belief{2, 7, 9}, got[0].B)

	// ErrNotHeld ends a belief when it is heard; an open belief lasts.
	ops = h([5]int{0, lk, ok, 0, 1}, [5]int{0, un, notHeld, 10, 11}, [5]int{1, lk, ok, 0, 5})
	got = CheckExclusive(ops)
	require.Len(t, got, 1)
	require.Equal(t, Forever, got[0].B.End)
}

func TestBeliefsFollowCountReads(t *testing.T) {
	// Owner 0's release at 4 has an unknown outcome; it reads 1 at 7 (still
	// held), releases at 8. Owner 1's acquire with an unknown outcome is
	// read as taken at 13: it believes from then.
	ops := cat(
		h([5]int{0, lk, ok, 0, 1}, [5]int{0, lk, ok, 2, 3}, [5]int{0, un, unknown, 4, 5}),
		v(h([5]int{0, cnt, ok, 6, 7}), 1),
		h([5]int{0, un, ok, 8, 9}, [5]int{1, try, unknown, 10, 11}),
		v(h([5]int{1, cnt, ok, 12, 13}), 1),
		v(h([5]int{2, cnt, ok, 14, 15}), 0))
	require.Equal(t, []Belief{{0, 1, 8}, {1, 13, Forever}}, Beliefs(ops))
	// A read of 0 ends a belief.
	ops = cat(h([5]int{0, lk, ok, 0, 1}, [5]int{0, lk, unknown, 2, 3}), v(h([5]int{0, cnt, ok, 4, 5}), 0))
	require.Equal(t, []Belief{{0, 1, 5}}, Beliefs(ops))
}

func TestCheckFIFO(t *testing.T) {
	waits := []Wait{
		{Owner: 0, JoinCall: 0, Joined: 1, Granted: 10},
		{Owner: 1, JoinCall: 2, Joined: 3, Granted: 20},
		{Owner: 2, JoinCall: 2, Joined: 4, Granted: 15}, // concurrent with 1: either order
	}
	require.Empty(t, CheckFIFO(waits))
	waits = append(waits, Wait{Owner: 3, JoinCall: 5, Joined: 6, Granted: 12})
	got := CheckFIFO(waits)
	require.Len(t, got, 2) // 3 overtook 1 and 2
	require.Equal(t, 3, got[0].Second.Owner)
}

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	out, err := r.Do(3, TryLock, func() error { return rlock.ErrNotObtained })
	require.Equal(t, NotObtained, out)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	r.Lost(3)
	r.Lapse(4, r.Now(), Forever)
	ops := r.Ops()
	require.Len(t, ops, 3)
	require.Equal(t, TryLock, ops[0].Kind)
	require.LessOrEqual(t, ops[0].Call, ops[0].Return)
	require.Equal(t, Forever, ops[2].Return)
	require.Equal(t, 0, Acquisitions(ops))
}

func TestGrace(t *testing.T) {
	// An unknown release seen taking effect 10 units after it returned.
	ops := h([5]int{0, lk, ok, 0, 1}, [5]int{0, un, unknown, 2, 3}, [5]int{1, try, notObt, 9, 10}, [5]int{1, lk, ok, 12, 13})
	require.Equal(t, porcupine.Ok, CheckLinearizable(ops, 20, time.Second).Verdict)
	r := CheckLinearizable(ops, 5, time.Second)
	require.Equal(t, porcupine.Illegal, r.Verdict)
	_ = os.Remove(r.Visualization)
}
