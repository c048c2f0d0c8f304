package fair_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// scriptStep names what one fair-lock script call did, from the commands
// it ran (see classifyRun).
type scriptStep string

const (
	stepRelease     scriptStep = "release, someone in line"  // fair_unlock.lua: DEL and PUBLISH
	stepGrant       scriptStep = "grant to the head"         // fair_lock.lua: LPOP
	stepJoinFree    scriptStep = "join, lock free, head due" // fair_lock.lua: RPUSH after LRANGE
	stepJoinHeld    scriptStep = "join behind the holder"    // fair_lock.lua: RPUSH, no LRANGE
	stepRenew       scriptStep = "renew a place"             // fair_lock.lua: LPOS
	stepOtherScript scriptStep = "other script call"
)

// maxCommandsPerStep bounds the commands of each step of a contended grant,
// its EVALSHA included: a busy queue's grant costs one release, one grant
// and one join (see scripts/fair_lock.lua). Issue 30 took them from 9, 12
// and 11-12 (32.5-33 commands per grant) to 8, 11 and 9-10: the release
// judges the head alive by its client's clock when that leaves T/3 to
// spare, the grant decides on the next in line's wake-up by the client's
// clock without pruning (the release does), and a join skips the prune
// behind a held lock and the ZSCORE before its ZADD NX. A grant that wakes
// the next in line (a Redisson waiter, or a lease shorter than the queue
// timeout) runs one PUBLISH more, and a join one PEXPIRE more about once
// per queue timeout (the liveness hash's TTL).
var maxCommandsPerStep = map[scriptStep]int{
	stepRelease:  8,
	stepGrant:    11,
	stepJoinFree: 10,
	stepJoinHeld: 9,
}

// classifyRun names the step of a fair-lock script call (name: "lock" or
// "unlock") from the commands it ran.
func classifyRun(name string, cmds []string) scriptStep {
	switch {
	case name == "unlock" && slices.Contains(cmds, "DEL") && slices.Contains(cmds, "PUBLISH"):
		return stepRelease
	case name == "lock" && slices.Contains(cmds, "LPOP") && slices.Contains(cmds, "HSET"):
		return stepGrant
	case name == "lock" && slices.Contains(cmds, "RPUSH") && slices.Contains(cmds, "LRANGE"):
		return stepJoinFree
	case name == "lock" && slices.Contains(cmds, "RPUSH"):
		return stepJoinHeld
	case name == "lock" && slices.Contains(cmds, "LPOS"):
		return stepRenew
	}
	return stepOtherScript
}

// TestContendedGrantCommandsPerScript runs TestContendedGrantServerCommands'
// workload under MONITOR and holds each script step of a contended grant
// to maxCommandsPerStep, logging every step's count per grant (the
// breakdown docs/benchmarks.md quotes, "Fair lock: commands per grant").
func TestContendedGrantCommandsPerScript(t *testing.T) {
	b := redistest.Real(t) // MONITOR: real Redis only
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rounds = 30
	names := map[string]string{lua.FairLock.Hash(): "lock", lua.FairUnlock.Hash(): "unlock"}
	// Load the scripts first, so that every call is an EVALSHA.
	rdb := b.NewClient(t)
	for _, s := range []string{lua.Source(lua.FairLock), lua.Source(lua.FairUnlock)} {
		if err := rdb.ScriptLoad(ctx, s).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := redistest.Monitor(t, b.Addr)
	contendedCommands(t, ctx, b, contendedRlock, rounds)
	m := stop()

	type tally struct {
		calls, commands int
		shapes          map[string]int
	}
	steps := map[scriptStep]*tally{}
	total := 0
	for _, run := range m.Scripts {
		name := names[run.SHA]
		if name == "" {
			name = "script " + run.SHA
		}
		step := classifyRun(name, run.Commands)
		n := 1 + len(run.Commands)
		total += n
		tl := steps[step]
		if tl == nil {
			tl = &tally{shapes: map[string]int{}}
			steps[step] = tl
		}
		tl.calls++
		tl.commands += n
		tl.shapes[fmt.Sprintf("%s (%d): EVALSHA %s", name, n, strings.Join(run.Commands, " "))]++
		if limit, ok := maxCommandsPerStep[step]; ok {
			counted := n
			if (step == stepJoinFree || step == stepJoinHeld) && run.Commands[len(run.Commands)-1] == "PEXPIRE" {
				counted-- // the liveness hash's TTL, extended about once per queue timeout
			}
			if step == stepGrant && slices.Contains(run.Commands, "PUBLISH") {
				counted-- // the next in line woken
			}
			assert.LessOrEqual(t, counted, limit, "%s: EVALSHA %s", step, strings.Join(run.Commands, " "))
		}
	}
	for cmd, n := range m.Others {
		if cmd != "INFO" && cmd != "CONFIG" && cmd != "SCRIPT" {
			total += n
		}
	}
	grants := float64(contendedOwners * rounds)
	var sb strings.Builder
	for _, step := range []scriptStep{stepRelease, stepGrant, stepJoinFree, stepJoinHeld, stepRenew, stepOtherScript} {
		tl := steps[step]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&sb, "%-26s %5.2f calls, %5.2f commands per grant\n", step, float64(tl.calls)/grants, float64(tl.commands)/grants)
		for shape, n := range tl.shapes {
			fmt.Fprintf(&sb, "    %4d x %s\n", n, shape)
		}
	}
	fmt.Fprintf(&sb, "outside scripts: %v", m.Others)
	t.Logf("%.2f commands per grant (MONITOR, the RESETSTAT and INFO of the count left out):\n%s", float64(total)/grants, sb.String())
}
