// Package lua builds the scripts rlock runs from the Lua files of package
// scripts, each with the preludes it needs.
package lua

import (
	"io/fs"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/scripts"
)

func src(name string) string {
	return code(inline(file(name)))
}

// file returns the embedded file name.lua.
func file(name string) string {
	b, err := fs.ReadFile(scripts.Files(), name+".lua")
	if err != nil {
		panic("lua: script " + name + " is not embedded") // a build error, caught by every test
	}
	return string(b)
}

// latchFastMark starts a line of a release script's fast path that stands
// for latch_fast.lua (see there) with its latch key, request ID and ttl
// filled in: "--@latch_fast KEYS[3] ARGV[7] ARGV[5]". One source serves
// every kind's fast path, which can define no prelude function.
const latchFastMark = "--@latch_fast"

var latchFast = file("latch_fast")

// inline replaces each latchFastMark line of lua by latch_fast.lua, indented
// as the line and with its names filled in.
func inline(lua string) string {
	var b strings.Builder
	for line := range strings.Lines(lua) {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, latchFastMark+" ") {
			b.WriteString(line)
			continue
		}
		names := strings.Fields(strings.TrimPrefix(t, latchFastMark))
		if len(names) != 3 {
			panic("lua: " + t + ": want a latch key, a request ID and a ttl") // a build error, caught by every test
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		fill := strings.NewReplacer("@LATCH", names[0], "@REQUEST", names[1], "@TTL", names[2])
		for l := range strings.Lines(code(latchFast)) {
			b.WriteString(indent + fill.Replace(l))
		}
	}
	return b.String()
}

// code returns the Lua source lua without its comment lines and blank
// lines: what the server runs. A server that compiles a script on every
// call (miniredis does) then reads a third less; the files keep their
// documentation. The scripts have no long strings or long comments, so a
// line whose first non-blank characters are "--" is a comment.
func code(lua string) string {
	var b strings.Builder
	b.Grow(len(lua))
	for line := range strings.Lines(lua) {
		t := strings.TrimSpace(line)
		if t != preludesHere && (t == "" || strings.HasPrefix(t, "--")) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// preludesHere is a line of a script file that ends its fast path: the
// preludes go there rather than in front. Redis runs a script's whole body
// on every call, and defining the preludes' functions costs about as much
// as a command; a call that returns in the fast path does not pay for it.
// The fast path must therefore use none of the preludes' functions.
const preludesHere = "--@preludes"

// splice puts prelude into script: just after its preludesHere line
// (which stays, so that a prelude spliced next goes before this one, as
// it would in front) or, without one, in front. Only the definitions of
// prelude that script uses are put in (see used).
func splice(prelude, script string) string {
	prelude = used(prelude, script)
	if fast, rest, ok := strings.Cut(script, preludesHere+"\n"); ok {
		return fast + preludesHere + "\n" + prelude + "\n" + rest
	}
	return prelude + "\n" + script
}

// A prelude is a run of top-level definitions, each starting at a line
// "local function name(" or "local name =" in column 0.
var definition = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)

// used returns the definitions of prelude that script uses, directly or
// through another definition it uses, in their order. Redis runs a
// script's whole body on every call, so each definition left out is work
// saved on every call (and miniredis, which compiles the script on every
// call, reads less). A prelude is spliced in front of the code that may
// use it, so script is all the code that can refer to its definitions.
func used(prelude, script string) string {
	type def struct {
		name, text string
		in         bool
	}
	var defs []*def
	for line := range strings.Lines(prelude) {
		if m := definition.FindStringSubmatch(line); m != nil {
			defs = append(defs, &def{name: m[1]})
		}
		if len(defs) > 0 { // a prelude starts with a definition (comments are gone)
			defs[len(defs)-1].text += line
		}
	}
	refersTo := func(code, name string) bool {
		return regexp.MustCompile(`\b` + name + `\b`).MatchString(code)
	}
	for grown := true; grown; {
		grown = false
		for _, d := range defs {
			if d.in {
				continue
			}
			users := script
			for _, e := range defs {
				if e.in {
					users += e.text
				}
			}
			if refersTo(users, d.name) {
				d.in, grown = true, true
			}
		}
	}
	var b strings.Builder
	for _, d := range defs {
		if d.in {
			b.WriteString(d.text)
		}
	}
	return b.String()
}

var (
	holdsSrc      = src("holds")
	clockSrc      = src("clock")
	publishSrc    = src("publish")
	fairCommonSrc = src("fair_common")
	rwCommonSrc   = src("rw_common")
	designateSrc  = src("designate")
)

func withHolds(name string) string { return splice(holdsSrc, src(name)) }

// rw builds a read-write-lock script (and renew.lua, which serves that
// kind too): the preludes publish.lua, holds.lua, clock.lua,
// designate.lua and rw_common.lua, then the script itself (only the
// definitions it uses: see used).
func rw(name string) *redis.Script {
	return script(withPublish(splice(holdsSrc+"\n"+clockSrc+"\n"+designateSrc+"\n"+rwCommonSrc, src(name))))
}

// withPublish prepends publish.lua, for scripts that wake waiters.
func withPublish(s string) string { return splice(publishSrc, s) }

var (
	// Lock acquires one hold of a reentrant lock (see lock.lua).
	Lock = reentrant(withHolds("lock"))
	// Unlock releases one hold of a reentrant lock (see unlock.lua).
	Unlock = reentrant(withHolds("unlock"))
	// PassOn passes a reentrant lock's designation on to other clients
	// (see pass_on.lua and designate.lua).
	PassOn = reentrant(src("pass_on"))
	// ForceUnlock deletes a lock whoever holds it (see force_unlock.lua).
	ForceUnlock = script(withPublish(withHolds("force_unlock")))
	// Renew renews a batch of leases for the watchdog (see renew.lua). It
	// serves every lock kind: a fair lock's hash is a reentrant lock's, and
	// a read-write lock's hash is told apart by its "mode" field.
	Renew = rw("renew")

	// FairLock acquires one hold of a fair lock or queues for it (see
	// fair_lock.lua).
	FairLock = fair(withHolds("fair_lock"))
	// FairUnlock releases one hold of a fair lock (see fair_unlock.lua).
	FairUnlock = fair(withHolds("fair_unlock"))
	// FairForceUnlock deletes a fair lock whoever holds it (see
	// fair_force_unlock.lua).
	FairForceUnlock = fair(withHolds("fair_force_unlock"))
	// FairLeave takes a waiter out of a fair lock's queue (see
	// fair_leave.lua).
	FairLeave = fair(src("fair_leave"))
	// FairQueue reads a fair lock's queue (see fair_queue.lua).
	FairQueue = fair(src("fair_queue"))

	// RWReadLock acquires one read hold of a read-write lock (see
	// rw_read_lock.lua).
	RWReadLock = rw("rw_read_lock")
	// RWWriteLock acquires one write hold of a read-write lock, or
	// registers a waiting writer (see rw_write_lock.lua).
	RWWriteLock = rw("rw_write_lock")
	// RWUnlockRead releases one read hold (see rw_unlock_read.lua).
	RWUnlockRead = rw("rw_unlock_read")
	// RWUnlockWrite releases one write hold (see rw_unlock_write.lua).
	RWUnlockWrite = rw("rw_unlock_write")
	// RWForceUnlock deletes a read-write lock whoever holds it (see
	// rw_force_unlock.lua).
	RWForceUnlock = rw("rw_force_unlock")
	// RWLeave takes a waiting writer out of the writer-wait set (see
	// rw_leave.lua).
	RWLeave = rw("rw_leave")
	// RWPassOn passes a read-write lock's designation on, or unregisters
	// a client (see rw_pass_on.lua).
	RWPassOn = rw("rw_pass_on")
	// RWHolds reads a reader's live hold count (see rw_holds.lua).
	RWHolds = rw("rw_holds")
	// RWState reads a read-write lock's holders, their leases and its
	// waiting writers in one consistent view (see rw_state.lua).
	RWState = rw("rw_state")
)

// reentrant builds a script that may register waiters or designate a
// client to wake one: the preludes clock.lua, publish.lua and
// designate.lua, then src.
func reentrant(src string) *redis.Script { return script(reentrantSrc(src)) }

func reentrantSrc(src string) string {
	return splice(clockSrc, withPublish(splice(designateSrc, src)))
}

func fair(src string) *redis.Script {
	return script(splice(clockSrc, withPublish(splice(fairCommonSrc, src))))
}

// assembled is every script's source (written only while the package
// initialises).
var assembled = map[*redis.Script]string{}

// Source returns the source of one of the package's scripts, for a caller
// that sends EVAL itself.
func Source(s *redis.Script) string { return assembled[s] }

func script(src string) *redis.Script {
	s := redis.NewScript(src)
	assembled[s] = src
	return s
}

// All lists every script (the semaphores' and the latch's included), for
// preloading (SCRIPT LOAD) on each server. Two entries may share a SHA
// when their sources differ only in comments (sem_release, sem_add).
func All() []*redis.Script {
	all := []*redis.Script{Lock, Unlock, PassOn, ForceUnlock, Renew,
		FairLock, FairUnlock, FairForceUnlock, FairLeave, FairQueue,
		RWReadLock, RWWriteLock, RWUnlockRead, RWUnlockWrite, RWForceUnlock, RWLeave, RWPassOn, RWHolds, RWState}
	all = append(all, semScripts()...)
	all = append(all, expScripts()...)
	return append(all, Latch()...)
}

// The reentrant and fair locks' fast paths (lock.lua, unlock.lua,
// fair_lock.lua, fair_unlock.lua) reply with the bare integer 1 where
// every other path replies with a table: Redis takes
// about half a microsecond to build and send a table, and the client
// allocates for every element. AcquireReply and ReleaseReply read any
// acquire or release script's reply as the table it stands for; callers
// must not modify the slice they return.
var (
	grantedOne   = []int64{1, 1, 0} // a grant of one hold, no fencing token
	releasedLast = []int64{1, 0}    // the owner's last hold released
)

// AcquireReply returns an acquire script's reply: the bare 1 stands for
// {1, 1, 0}, a grant of one hold without a fencing token.
func AcquireReply(cmd *redis.Cmd) ([]int64, error) { return ints(cmd, grantedOne) }

// ReleaseReply returns a release script's reply: the bare 1 stands for
// {1, 0}, the owner's last hold released.
func ReleaseReply(cmd *redis.Cmd) ([]int64, error) { return ints(cmd, releasedLast) }

func ints(cmd *redis.Cmd, one []int64) ([]int64, error) {
	if v, ok := cmd.Val().(int64); ok && v == 1 && cmd.Err() == nil {
		return one, nil
	}
	return cmd.Int64Slice()
}
