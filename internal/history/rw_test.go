package history

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// rw builds a read-write history from (owner, side, kind, outcome, call,
// return) rows.
func rw(rows ...[6]int) []Op {
	ops := make([]Op, len(rows))
	for i, r := range rows {
		ops[i] = Op{Owner: r[0], Side: Side(r[1]), Kind: Kind(r[2]), Outcome: Outcome(r[3]), Call: int64(r[4]), Return: int64(r[5])}
	}
	return ops
}

var rd, wr, whole = int(Read), int(Write), int(NoSide)

func TestRWLinearizable(t *testing.T) {
	cases := []struct {
		name  string
		ops   []Op
		legal bool
	}{
		{"readers share", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}, [6]int{0, rd, un, ok, 4, 5}, [6]int{1, rd, un, ok, 6, 7}), true},
		{"a reader during a write", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}), false},
		{"a writer during a read", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, wr, try, ok, 2, 3}), false},
		{"two writers", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{1, wr, lk, ok, 2, 3}), false},
		{"writer waits for the reader", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, wr, lk, ok, 2, 10}, [6]int{0, rd, un, ok, 5, 6}), true},
		{"downgrade: the writer reads, releases the write, others read", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{0, rd, lk, ok, 2, 3}, [6]int{0, wr, un, ok, 4, 5},
			[6]int{1, rd, try, ok, 6, 7}, [6]int{0, rd, un, ok, 8, 9}, [6]int{1, rd, un, ok, 10, 11}), true},
		{"no other reader before the downgrading writer releases its write", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{0, rd, lk, ok, 2, 3}, [6]int{1, rd, try, ok, 4, 5}), false},
		{"upgrade never granted", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{0, wr, try, ok, 2, 3}), false},
		{"re-entries count per side", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{0, wr, try, ok, 2, 3}, [6]int{0, wr, un, ok, 4, 5},
			[6]int{1, rd, try, notObt, 6, 7}, [6]int{0, wr, un, ok, 8, 9}, [6]int{1, rd, try, ok, 10, 11}), true},
		{"a read released one hold too many", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{0, rd, un, ok, 2, 3}, [6]int{0, rd, un, ok, 4, 5}), false},
		{"another owner's read release refused", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, un, notHeld, 2, 3}, [6]int{1, rd, un, ok, 4, 5}), false},
		{"a new reader may be refused while readers hold (a writer may wait)", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, try, notObt, 2, 3}), true},
		{"a read re-entry is never refused", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{0, rd, try, notObt, 2, 3}), false},
		{"a write try refused while free", rw(
			[6]int{0, wr, try, notObt, 0, 1}), false},
		{"unknown write acquire that took effect", rw(
			[6]int{0, wr, lk, unknown, 0, 1}, [6]int{1, wr, try, notObt, 2, 3}), true},
		{"unknown write acquire cannot explain a reader during a write", rw(
			[6]int{0, wr, lk, ok, 0, 1}, [6]int{1, rd, lk, unknown, 2, 3}, [6]int{2, rd, lk, ok, 4, 5}), false},
		{"unknown read release taking effect late", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{0, rd, un, unknown, 2, 3},
			[6]int{1, wr, try, notObt, 4, 5}, [6]int{1, wr, lk, ok, 6, 7}), true},
		{"wipe frees every side", rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}, [6]int{-1, whole, wipe, ok, 4, 6},
			[6]int{2, wr, lk, ok, 7, 8}), true},
		{"force unlock frees every side", append(rw(
			[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}), v(rw([6]int{3, whole, force, ok, 4, 5}), 1)[0],
			rw([6]int{2, wr, lk, ok, 6, 7})[0]), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := CheckRWLinearizable(tc.ops, -1, 10*time.Second)
			require.NoError(t, err)
			if tc.legal {
				require.Equal(t, porcupine.Ok, res.Verdict)
			} else {
				require.Equal(t, porcupine.Illegal, res.Verdict)
				require.NotEmpty(t, res.Visualization)
			}
		})
	}
}

// TestRWCountPinsUnknown: a count read pins down what an unknown re-entry
// did (no grace: it cannot take effect after it returned).
func TestRWCountPinsUnknown(t *testing.T) {
	ops := cat(rw([6]int{0, rd, lk, ok, 0, 1}, [6]int{0, rd, lk, unknown, 2, 3}), v(rw([6]int{0, rd, cnt, ok, 4, 5}), 2),
		rw([6]int{0, rd, un, ok, 6, 7}, [6]int{0, rd, un, ok, 8, 9}, [6]int{1, wr, try, ok, 10, 11}))
	res, err := CheckRWLinearizable(ops, 0, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res.Verdict)
	ops[2].Value = 1 // the re-entry did not take effect: the second release had nothing to release
	res, err = CheckRWLinearizable(ops, 0, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, res.Verdict)
}

func TestRWOwnerRange(t *testing.T) {
	_, err := CheckRWLinearizable(rw([6]int{MaxRWOwners, rd, lk, ok, 0, 1}), 0, time.Second)
	require.Error(t, err)
	_, err = CheckRWLinearizable(rw([6]int{-1, rd, lk, ok, 0, 1}), 0, time.Second)
	require.Error(t, err)
}

func TestRWExclusive(t *testing.T) {
	// Readers overlap; the writer comes after them; the writer's own read
	// overlaps its write.
	legal := rw(
		[6]int{0, rd, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}, [6]int{0, rd, un, ok, 4, 5}, [6]int{1, rd, un, ok, 6, 7},
		[6]int{2, wr, lk, ok, 5, 8}, [6]int{2, rd, lk, ok, 9, 10}, [6]int{2, wr, un, ok, 11, 12}, [6]int{2, rd, un, ok, 13, 14})
	require.Empty(t, CheckRWExclusive(legal))

	readerInWrite := rw([6]int{0, wr, lk, ok, 0, 1}, [6]int{1, rd, lk, ok, 2, 3}, [6]int{1, rd, un, ok, 4, 5}, [6]int{0, wr, un, ok, 6, 7})
	got := CheckRWExclusive(readerInWrite)
	require.Len(t, got, 1)
	require.Equal(t, Write, got[0].ASide)
	require.Equal(t, Read, got[0].BSide)
	require.Contains(t, got[0].String(), "write owner 0")

	twoWriters := rw([6]int{0, wr, lk, ok, 0, 1}, [6]int{1, wr, lk, ok, 2, 3})
	require.Len(t, CheckRWExclusive(twoWriters), 1)

	// A reader told of its loss (Lost, read side) before a writer came.
	told := rw([6]int{0, rd, lk, ok, 0, 1}, [6]int{0, rd, lost, ok, 2, 2}, [6]int{1, wr, lk, ok, 3, 4})
	require.Empty(t, CheckRWExclusive(told))
}
