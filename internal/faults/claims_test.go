package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// This file holds the holder-against-server check ("claims"): while a
// fault run goes on, a sampler compares, over and over, what every handle
// says (Err nil and Until ahead: "I hold until U") with what Redis holds.
//
//   - Cover: whenever a handle says it holds until U, the server shows its
//     owner holding (for a read hold: a live timeout key of the owner) with
//     a protection that lasts at least until U, less the tolerance; for a
//     MultiLock or RedLock, on at least k of its members (all of them in
//     all mode). The protection of a hash field is the hash's PTTL; of a
//     read hold, min(the hash's PTTL, the longest PTTL of the owner's
//     timeout keys {name}:<field>:rwlock_timeout:<n>). The server is read
//     in one MULTI per server, between two local clock readings t0 and t1,
//     and Until is read before t0: the hold is covered when
//     t1 + protection + tolerance >= Until, which can only err towards
//     passing (the server ran the read at some point in [t0, t1]).
//   - Orphan: whenever the server shows an owner holding, a handle of that
//     owner says so, or a call of that owner is in flight (its acquire or
//     release, or the count read that settles an unknown outcome), or the
//     hold ends within the slack of the last Until a handle of the owner
//     reported. The slack covers what the library cannot know: a renewal
//     or acquire that ran but whose reply was lost sets a TTL counted from
//     a later moment than the one the handle counts from.
//
// A sample excuses, for Cover, a handle with a release or SetLease in
// flight at either word reading (they may delete or shorten the hold
// before the handle learns), and for Orphan, a handle with any call in
// flight. The sampler uses clients of its own, never the workers'; a
// sample costs one round trip per server.

// claimTol is the clock tolerance of the Cover check: the client and the
// servers share the host's clock (miniredis follows the Go clock), so only
// PTTL's millisecond truncation and scheduling noise remain.
const claimTol = 5 * time.Millisecond

// maxReadKeys bounds the timeout keys read per reader field: holds beyond
// it are not seen, and the reader's Cover check is skipped when its count
// is larger.
const maxReadKeys = 8

// claimant is what the check needs of a handle: its word.
type claimant interface {
	Err() error
	Until() time.Time
}

// activity counts the calls in flight on one owner's handles: every call,
// and apart the calls that may delete or shorten a hold (Unlock, SetLease).
// The sequence numbers move at every start and end, so a sample sees a
// call that started and ended between its two readings.
type activity struct {
	calls, shortening atomic.Int64
	seq, shortSeq     atomic.Int64
}

// begin marks a call in flight until the returned func is called.
func (a *activity) begin(shortens bool) func() {
	a.calls.Add(1)
	a.seq.Add(1)
	if shortens {
		a.shortening.Add(1)
		a.shortSeq.Add(1)
	}
	return func() {
		if shortens {
			a.shortSeq.Add(1)
			a.shortening.Add(-1)
		}
		a.seq.Add(1)
		a.calls.Add(-1)
	}
}

// member is one hold that backs a claim: a field of a lock hash on one of
// the check's servers.
type member struct {
	server int    // index into claimCheck.servers
	name   string // the lock hash
	field  string // the owner field; "" is any holder field of the hash
	read   bool   // a read hold: its timeout keys protect it
}

// claim is a handle under check.
type claim struct {
	label   string
	h       claimant
	act     *activity
	members []member
	quorum  int // members that must cover Until
	// orphans: the members' fields are this handle's: a hold of one of
	// them that no handle claims is an orphan.
	orphans bool

	lastUntil time.Time // the latest Until seen while the handle held
}

// word is a claim's state at one reading.
type word struct {
	at                      time.Time
	err                     error
	until                   time.Time
	calls, short, seq, sseq int64
}

func (c *claim) read() word {
	w := word{calls: c.act.calls.Load(), short: c.act.shortening.Load(), seq: c.act.seq.Load(), sseq: c.act.shortSeq.Load()}
	w.at = time.Now()
	w.err, w.until = c.h.Err(), c.h.Until()
	return w
}

func (w word) holds() bool { return w.err == nil && w.until.After(w.at) }

// hold is what the server shows of one field of a lock hash.
type hold struct {
	count    int64
	protect  time.Duration // how long the hold lasts from the read; <= 0: gone
	keysSeen bool          // a read hold whose timeout keys were all read
}

// snapshot is one server's answer to a sample.
type snapshot struct {
	t0, t1 time.Time
	ok     bool
	holds  map[string]map[string]hold // name -> field -> hold
}

// claimCheck samples claims against servers until stopped.
type claimCheck struct {
	t       testing.TB
	servers []redis.UniversalClient
	claims  []*claim
	tol     time.Duration
	slack   time.Duration // Orphan: how long a hold may outlast its owner's last word
	cover   bool          // run the Cover check (off where a fault deletes holds: restart, force unlock)
	// strangers: holder fields no claim names are allowed (a killed
	// holder process's).
	strangers bool

	mu         sync.Mutex
	samples    int
	checked    int // claims compared with the server while they held or the server held
	violations []string
	counted    int
}

// newClaimCheck returns a check reading servers (clients of its own).
func newClaimCheck(t testing.TB, slack time.Duration, servers ...redis.UniversalClient) *claimCheck {
	return &claimCheck{t: t, servers: servers, tol: claimTol, slack: slack, cover: true}
}

// add registers a claim; it must be called before run.
func (cc *claimCheck) add(c *claim) {
	if c.quorum == 0 {
		c.quorum = len(c.members)
	}
	cc.claims = append(cc.claims, c)
}

// handleClaim is a claim on one field of one lock, the handle's own.
func handleClaim(label string, h claimant, act *activity, server int, name, field string, read bool) *claim {
	return &claim{label: label, h: h, act: act, orphans: true,
		members: []member{{server: server, name: name, field: field, read: read}}}
}

// run samples until stop is closed, pausing every between samples.
func (cc *claimCheck) run(stop <-chan struct{}, every time.Duration) {
	for !closed(stop) {
		cc.sample()
		if every > 0 && sleepOrStop(every, stop) {
			return
		}
	}
}

// sample reads every claim's word, the servers, and the words again, and
// checks them.
func (cc *claimCheck) sample() {
	before := make([]word, len(cc.claims))
	for i, c := range cc.claims {
		before[i] = c.read()
	}
	// The servers are read concurrently, so a frozen one (its read ends
	// at its client's timeout) does not stop the others from being read.
	snaps := make([]snapshot, len(cc.servers))
	var reads sync.WaitGroup
	for i := range cc.servers {
		reads.Add(1)
		go func() {
			defer reads.Done()
			snaps[i] = cc.readServer(i)
		}()
	}
	reads.Wait()
	after := make([]word, len(cc.claims))
	for i, c := range cc.claims {
		after[i] = c.read()
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.samples++
	for i, c := range cc.claims {
		if before[i].holds() {
			c.lastUntil = maxTime(c.lastUntil, before[i].until)
		}
		if cc.cover {
			cc.checkCover(c, before[i], after[i], snaps)
		}
	}
	cc.checkOrphans(before, after, snaps)
}

// readServer reads, in one MULTI, every hash of server i the claims name,
// its PTTL, and the timeout keys of its read members.
func (cc *claimCheck) readServer(i int) snapshot {
	type readKeys struct {
		name, field string
		pttls       []*redis.DurationCmd
	}
	names := map[string]bool{}
	var reads []readKeys
	var writers [][2]string
	seenRead := map[[2]string]bool{}
	for _, c := range cc.claims {
		for _, m := range c.members {
			if m.server != i {
				continue
			}
			names[m.name] = true
			if strings.HasSuffix(m.field, ":write") && !slices.Contains(writers, [2]string{m.name, m.field}) {
				writers = append(writers, [2]string{m.name, m.field})
			}
			if m.read && m.field != "" && !seenRead[[2]string{m.name, m.field}] {
				seenRead[[2]string{m.name, m.field}] = true
				reads = append(reads, readKeys{name: m.name, field: m.field})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hashes := map[string]*redis.MapStringStringCmd{}
	pttls := map[string]*redis.DurationCmd{}
	untils := map[[2]string]*redis.StringCmd{}
	var clock *redis.TimeCmd
	s := snapshot{t0: time.Now()}
	cmds, err := cc.servers[i].TxPipelined(ctx, func(p redis.Pipeliner) error {
		for name := range names {
			hashes[name] = p.HGetAll(ctx, name)
			pttls[name] = p.PTTL(ctx, name)
		}
		for j := range reads {
			for n := int64(1); n <= maxReadKeys; n++ {
				reads[j].pttls = append(reads[j].pttls, p.PTTL(ctx, base.RWTimeoutKey(reads[j].name, reads[j].field, n)))
			}
		}
		for _, w := range writers {
			untils[w] = p.Get(ctx, writeUntilKey(w[0], w[1]))
		}
		clock = p.Time(ctx)
		return nil
	})
	s.t1 = time.Now()
	if err != nil && !errors.Is(err, redis.Nil) {
		return s // a fault (a frozen or restarting server): no verdict this time
	}
	// A pipeline's error is its first command's: redis.Nil from the GET of
	// a missing write-until record (the usual case) is an answer, not a
	// failure, and must not hide a real failure of a later command.
	for _, c := range cmds {
		if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
			return s
		}
	}
	s.ok = true
	s.holds = map[string]map[string]hold{}
	for name, hc := range hashes {
		fields := map[string]hold{}
		ttl := pttlOf(pttls[name])
		for f, v := range hc.Val() {
			if f == base.RWModeField {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			fields[f] = hold{count: n, protect: ttl}
		}
		s.holds[name] = fields
	}
	lapseWriters(s.holds, untils, clock.Val())
	for _, r := range reads {
		h, ok := s.holds[r.name][r.field]
		if !ok {
			continue
		}
		longest := time.Duration(0)
		for _, pc := range r.pttls {
			longest = max(longest, pttlOf(pc))
		}
		h.protect = min(h.protect, longest)
		h.keysSeen = h.count <= maxReadKeys
		s.holds[r.name][r.field] = h
	}
	return s
}

// writeUntilKey is where a read-write lock records the end of a write
// hold's lease while its owner also reads (see until_key in
// scripts/rw_common.lua): every rw script treats the writer as gone once
// that time has passed, so the check does too.
func writeUntilKey(name, field string) string {
	return base.SuffixKey(name, field+":rwlock_until")
}

// lapseWriters applies the write-until records to holds: a writer whose
// recorded end has passed on the server's clock holds nothing; one whose
// end lies ahead is protected no longer than that.
func lapseWriters(holds map[string]map[string]hold, untils map[[2]string]*redis.StringCmd, now time.Time) {
	for w, c := range untils {
		ms, err := strconv.ParseInt(c.Val(), 10, 64)
		h, ok := holds[w[0]][w[1]]
		if err != nil || !ok {
			continue // no record: the writer lasts as long as the hash
		}
		left := time.UnixMilli(ms).Sub(now)
		if left <= 0 {
			delete(holds[w[0]], w[1])
			continue
		}
		h.protect = min(h.protect, left)
		holds[w[0]][w[1]] = h
	}
}

// pttlOf is a PTTL reply as a protection: the remaining TTL, a long one
// for a key without expiry, and 0 for a missing key.
func pttlOf(c *redis.DurationCmd) time.Duration {
	d := c.Val()
	switch {
	case d == -1: // go-redis: no expiry
		return time.Hour
	case d < 0:
		return 0
	}
	return d
}

// checkCover: a handle that says it holds until U (before the server read,
// with nothing in flight that may shorten or delete its holds) must have
// the server cover U on at least its quorum of members.
func (cc *claimCheck) checkCover(c *claim, b, a word, snaps []snapshot) {
	if !b.holds() || b.short > 0 || a.short > 0 || b.sseq != a.sseq {
		return
	}
	covered, judged := 0, 0
	var why []string
	for _, m := range c.members {
		s := snaps[m.server]
		if !s.ok {
			continue
		}
		if !b.until.After(s.t1.Add(cc.tol)) {
			covered++ // the claim ends before the read could have run
			judged++
			continue
		}
		judged++
		h, ok := findHold(s, m)
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("%s: %s not held by %q", serverName(m.server), m.name, m.field))
		case m.read && !h.keysSeen:
			covered++ // more read holds than the sample reads: no verdict
		case s.t1.Add(h.protect + cc.tol).Before(b.until):
			why = append(why, fmt.Sprintf("%s: %s held by %q (count %d) for %v after the read, until %s at the latest, %v short of Until",
				serverName(m.server), m.name, m.field, h.count, h.protect, clock(s.t1.Add(h.protect)), b.until.Sub(s.t1.Add(h.protect)).Round(time.Millisecond)))
		default:
			covered++
		}
	}
	if judged < c.quorum {
		return // servers unreadable: no verdict
	}
	cc.checked++
	if covered < c.quorum {
		cc.violate("cover: %s says it holds (Err nil) until %s, read at %s; the server covers %d of the %d members needed: %s",
			c.label, clock(b.until), clock(b.at), covered, c.quorum, strings.Join(why, "; "))
	}
}

// findHold returns m's hold in s (field "" : the longest-protected holder).
func findHold(s snapshot, m member) (hold, bool) {
	fields := s.holds[m.name]
	if m.field != "" {
		h, ok := fields[m.field]
		return h, ok && h.protect > 0
	}
	var best hold
	found := false
	for _, h := range fields {
		if h.protect > 0 && (!found || h.protect > best.protect) {
			best, found = h, true
		}
	}
	return best, found
}

// checkOrphans: every hold the servers show belongs to a claim that says
// it holds, has a call in flight, or ends within the slack of its last
// word.
func (cc *claimCheck) checkOrphans(before, after []word, snaps []snapshot) {
	type key struct {
		server      int
		name, field string
	}
	owners := map[key][]int{}
	wildcard := map[key][]int{} // server+name -> claims taking any field
	for i, c := range cc.claims {
		if !c.orphans {
			continue
		}
		for _, m := range c.members {
			k := key{m.server, m.name, m.field}
			if m.field == "" {
				wildcard[k] = append(wildcard[k], i)
			} else {
				owners[k] = append(owners[k], i)
			}
		}
	}
	for si, s := range snaps {
		if !s.ok {
			continue
		}
		for name, fields := range s.holds {
			for field, h := range fields {
				if h.protect <= 0 {
					continue
				}
				ids := owners[key{si, name, field}]
				if len(ids) == 0 {
					ids = wildcard[key{si, name, ""}]
				}
				if len(ids) == 0 {
					if !cc.strangers {
						cc.violate("orphan: %s: %s held by %q, which no handle under check owns, for %v", serverName(si), name, field, h.protect)
					}
					continue
				}
				cc.checked++
				var last time.Time
				excused := false
				for _, i := range ids {
					b, a := before[i], after[i]
					if b.holds() || a.holds() || b.calls > 0 || a.calls > 0 || b.seq != a.seq {
						excused = true
						break
					}
					last = maxTime(last, cc.claims[i].lastUntil)
				}
				if excused {
					continue
				}
				end := s.t0.Add(h.protect) // the hold lasts at least until then
				if limit := maxTime(last, s.t0).Add(cc.slack); end.After(limit) {
					cc.violate("orphan: %s: %s held by %q (count %d) for %v after %s, while no handle of that owner says it holds or has a call in flight; its last Until was %s (slack %v)",
						serverName(si), name, field, h.count, h.protect, clock(s.t0), clock(last), cc.slack)
				}
			}
		}
	}
}

func (cc *claimCheck) violate(format string, args ...any) {
	cc.counted++
	if len(cc.violations) < 3 {
		cc.violations = append(cc.violations, fmt.Sprintf(format, args...))
	}
}

// result returns the figures: samples taken, comparisons made, violations
// found, and the first violations' descriptions.
func (cc *claimCheck) result() (samples, checked, violations int, first []string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.samples, cc.checked, cc.counted, append([]string(nil), cc.violations...)
}

// report fails t with the violations found, and logs the figures.
func (cc *claimCheck) report(t testing.TB, label string) (samples, violations int) {
	t.Helper()
	samples, checked, violations, first := cc.result()
	t.Logf("%s: holder-vs-server check: %d samples, %d comparisons, %d violations", label, samples, checked, violations)
	for _, v := range first {
		t.Errorf("holder-vs-server: %s", v)
	}
	if violations > len(first) {
		t.Errorf("holder-vs-server: and %d more violations", violations-len(first))
	}
	return samples, violations
}

func serverName(i int) string { return "server " + strconv.Itoa(i) }

func clock(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.000")
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
