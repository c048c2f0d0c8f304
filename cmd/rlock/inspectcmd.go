package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/inspect"
)

const inspectHelp = `Usage: rlock inspect [flags] NAME

Shows the Redis state of lock NAME, for any lock kind (reentrant or fair,
rlock or Redisson): its holders (owner field "<clientID>:<ownerID>" and hold
count), remaining TTL, fencing token counter, the fair lock's queue with each
waiter's deadline, and how many clients are subscribed to the lock's channel
and to each waiter's channel. It only reads.

A fair-queue waiter's deadline is its score in redisson_lock_timeout:{NAME},
which Redisson makes cumulative: a waiter's score is the one ahead of it plus
the thread wait time (5 min by default), so the n-th waiter shows about
n x 5 min even while it is alive. It is the deadline Redisson's own scripts
judge a waiter by. A live rlock waiter also renews a liveness deadline of
now + its queue timeout (30 s by default) at least every third of it; rlock's
scripts drop an rlock waiter only once that passes, and its score never falls
below it.

A NAME with no key and no waiter is shown as "no such lock" ("exists": false
in JSON): a released lock leaves no key unless it has a token counter, so it
is free if the name is right.

A semaphore's or count-down latch's count (a string key holding an integer)
is shown as such: a semaphore's available permits, and for a semaphore
whose permits have owners and leases ({NAME}:timeout) each held permit's ID
(32 hex characters) with its expiry, or "no lease" for Redisson's
never-expires score; a latch's count. A bare count cannot always be told
from the other: then it says "a semaphore's available permits or a
count-down latch's count". In JSON it is the "count" object.

A key that does not have a lock's shape (owner fields "<clientID>:<ownerID>"
with hold counts, a read-write lock's mode and writer fields, and a TTL,
which every rlock and Redisson lock has) is refused as "not a lock".

Flags may come before or after NAME. Exit status: 0 ok (also for no such
lock, and when --watch is ended by Ctrl-C), 1 Redis error or NAME is not a
lock, 2 bad usage,
3 Redis unreachable, 4 Redis refused the connection (password, database).

Flags:
`

func inspectCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("rlock inspect", inspectHelp, e)
	var (
		conn     connFlags
		fair     bool
		watch    bool
		jsonOut  bool
		interval time.Duration
	)
	conn.register(fs, defaultRedisURL)
	fs.BoolVar(&fair, "fair", false, "always show the fair queue section, even when empty (it is shown whenever the queue exists)")
	fs.BoolVar(&watch, "watch", false, "refresh every --interval until interrupted (Ctrl-C)")
	fs.DurationVar(&interval, "interval", time.Second, "refresh period for --watch")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object (one per line and refresh with --watch)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	name, err := lockName(pos)
	if err != nil {
		return err
	}
	if interval <= 0 {
		return usageError("--interval must be positive")
	}
	rdb, tgt, err := conn.connect(ctx, defaultRedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	tgt.warn(e, "inspect")

	show := func(r *inspect.Report) error {
		if jsonOut {
			return json.NewEncoder(e.stdout).Encode(toJSON(r))
		}
		return writeText(e.stdout, r, fair)
	}
	if !watch {
		r, err := inspect.Read(ctx, rdb, name, time.Now())
		if err != nil {
			return err
		}
		return show(r)
	}
	return watchLoop(ctx, rdb, name, interval, e, jsonOut, show)
}

// watchLoop shows the lock every interval until ctx ends, which is a clean
// exit. A Redis error is reported and retried at the next refresh; a key
// that is not a lock ends the loop.
func watchLoop(ctx context.Context, rdb redis.UniversalClient, name string, interval time.Duration, e env,
	jsonOut bool, show func(*inspect.Report) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		r, err := inspect.Read(ctx, rdb, name, time.Now())
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, inspect.ErrNotALock):
			return err
		case err != nil:
			fmt.Fprintf(e.stderr, "rlock inspect: %s: %v\n", time.Now().Format(timeFormat), err)
		default:
			if !jsonOut {
				if e.stdoutTTY {
					fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear screen
				} else if !first {
					fmt.Fprintln(e.stdout)
				}
			}
			if err := show(r); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

const timeFormat = "2006-01-02 15:04:05.000 MST"

// writeText prints r for people.
func writeText(w io.Writer, r *inspect.Report, fair bool) error {
	if r.Count != nil {
		return writeCount(w, r)
	}
	var b strings.Builder
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-12s %s\n", k, fmt.Sprintf(format, a...)) }
	row("lock", "%s", r.Name)
	row("at", "%s", r.Time.Format(timeFormat))
	switch {
	case !exists(r):
		row("state", "no such lock (no key and no waiter: free, if the name is right)")
	case !r.Locked:
		row("state", "free")
	case r.Expires:
		row("state", "held, TTL %s", roundDur(r.TTL))
	default:
		row("state", "held, no expiry (only an unlock frees it)")
	}
	if r.Mode != "" {
		row("mode", "%s (a Redisson read-write lock)", r.Mode)
	}
	for i, h := range r.Holders {
		k := ""
		if i == 0 {
			k = "holders"
		}
		row(k, "%s  %s%s", h.Field, plural(h.Holds, "hold"), rwRole(r, h))
		if h.OwnerID != "" {
			row("", "  client %s, owner %s", h.ClientID, h.OwnerID)
		}
	}
	if r.Mode != "" {
		writeWaitingWriters(&b, r)
	}
	if r.HasToken {
		row("token", "%d (last fencing token granted)", r.Token)
	} else {
		row("token", "none")
	}
	row("subscribers", "%s on %s", plural(r.Subscribers, "client"), r.Channel)
	if len(r.Queue) > 0 || fair {
		if len(r.Queue) == 0 {
			row("fair queue", "empty")
		} else {
			row("fair queue", "%s, head first", plural(int64(len(r.Queue)), "waiter"))
		}
		for i, q := range r.Queue {
			dl := "no deadline"
			if q.HasDeadline {
				dl = "deadline " + q.Deadline.Format(timeFormat)
				if q.Overdue(r.Time) {
					dl += " (overdue: pruned at the next attempt)"
				} else {
					dl += " (in " + roundDur(q.Deadline.Sub(r.Time)) + ")"
				}
			}
			fmt.Fprintf(&b, "  %2d. %s\n      %s, %s subscribed\n", i+1, q.Field, dl, plural(q.Subscribers, "client"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCount prints a semaphore's or count-down latch's count for people.
func writeCount(w io.Writer, r *inspect.Report) error {
	var b strings.Builder
	c := r.Count
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-12s %s\n", k, fmt.Sprintf(format, a...)) }
	row("name", "%s", r.Name)
	row("at", "%s", r.Time.Format(timeFormat))
	row("kind", "%s (not a lock)", c.Kind)
	switch {
	case c.Missing:
		row("count", "0 available permits (no counter key; held permits below)")
	case c.Kind == inspect.CountLatch:
		row("count", "%d (the latch opens at 0)", c.Value)
	case c.Kind == inspect.CountUnknown:
		row("count", "%d: a semaphore's available permits or a count-down latch's count", c.Value)
	default:
		row("count", "%s available", plural(c.Value, "permit"))
	}
	if c.Expires {
		row("ttl", "%s", roundDur(c.TTL))
	}
	if c.Kind == inspect.CountExpirable {
		row("held", "%s in %s, first to expire first", plural(int64(len(c.Permits)), "permit"), c.Timeout)
		for i, p := range c.Permits {
			fmt.Fprintf(&b, "  %2d. %s\n      %s\n", i+1, p.ID, permitLease(p, r.Time))
		}
	}
	if c.Kind != inspect.CountLatch {
		row("subscribers", "%s on %s", plural(c.SemaphoreSubscribers, "client"), c.SemaphoreChannel)
	}
	if c.Kind != inspect.CountSemaphore && c.Kind != inspect.CountExpirable {
		row("subscribers", "%s on %s", plural(c.LatchSubscribers, "client"), c.LatchChannel)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// permitLease describes a held permit's lease.
func permitLease(p inspect.Permit, now time.Time) string {
	switch {
	case p.NoLease:
		return "no lease (Redisson's never-expires score): held until released"
	case p.Overdue(now):
		return "expired " + p.Expiry.Format(timeFormat) + " (returned to the pool by the next call)"
	}
	return "expires " + p.Expiry.Format(timeFormat) + " (in " + roundDur(p.Expiry.Sub(now)) +
		"; a permit taken without a lease is pushed back by its holder's watchdog)"
}

// exists reports whether r saw any trace of the lock: a key (the lock
// hash, its token counter, a fair queue, waiting writers) or a client
// subscribed to its channel. A released reentrant lock without a token
// counter leaves none, so this cannot tell it from a mistyped name.
func exists(r *inspect.Report) bool {
	return r.Locked || r.HasToken || len(r.Queue) > 0 || len(r.WaitingWriters) > 0 || r.Subscribers > 0
}

// rwRole describes a holder of a read-write lock: writer, or reader with
// its own remaining lease; nothing for other locks.
func rwRole(r *inspect.Report, h inspect.Holder) string {
	switch {
	case r.Mode == "":
		return ""
	case h.Writer:
		return "  (writer)"
	case h.Lease < 0:
		return "  (reader, no expiry)"
	case h.Lease == 0:
		return "  (reader, lease ran out: pruned at the next writer's attempt)"
	}
	return "  (reader, lease " + roundDur(h.Lease) + ")"
}

// writeWaitingWriters prints a read-write lock's waiting writers.
func writeWaitingWriters(b *strings.Builder, r *inspect.Report) {
	if len(r.WaitingWriters) == 0 {
		fmt.Fprintf(b, "%-12s %s\n", "waiting", "no writer waits")
		return
	}
	verb := "keep"
	if len(r.WaitingWriters) == 1 {
		verb = "keeps"
	}
	fmt.Fprintf(b, "%-12s %s %s new readers out\n", "waiting", plural(int64(len(r.WaitingWriters)), "writer"), verb)
	for i, w := range r.WaitingWriters {
		dl := "until " + w.Deadline.Format(timeFormat)
		if w.Overdue(r.Time) {
			dl += " (overdue: no longer waiting)"
		} else {
			dl += " (in " + roundDur(w.Deadline.Sub(r.Time)) + ")"
		}
		fmt.Fprintf(b, "  %2d. %s\n      %s\n", i+1, w.Field, dl)
	}
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// roundDur prints d to a tenth of a second ("12.3s"), or to the
// millisecond below one second.
func roundDur(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// jsonReport is inspect's --json output. Absent values are null, never
// magic numbers.
type jsonReport struct {
	Name        string       `json:"name"`
	Time        time.Time    `json:"time"`
	Exists      bool         `json:"exists"` // false: no key and no waiter ("no such lock")
	Locked      bool         `json:"locked"`
	Holders     []jsonHolder `json:"holders"`
	Mode        string       `json:"mode,omitempty"` // a Redisson read-write lock's mode
	TTLMillis   *int64       `json:"ttl_ms"`         // null when free or without expiry
	NoExpiry    bool         `json:"no_expiry"`      // held and never expires
	Token       *int64       `json:"token"`          // null when there is no token counter
	Channel     string       `json:"channel"`
	Subscribers int64        `json:"subscribers"`
	Queue       []jsonWaiter `json:"queue"`
	// A read-write lock's waiting writers; absent for other locks.
	WaitingWriters *[]jsonWaitingWriter `json:"waiting_writers,omitempty"`
	// A semaphore's or count-down latch's count; absent for a lock (the
	// lock fields are then zero).
	Count *jsonCount `json:"count,omitempty"`
}

type jsonCount struct {
	// Kind: "semaphore", "expirable semaphore", "count-down latch" or
	// "semaphore or count-down latch" (nothing tells them apart).
	Kind      string `json:"kind"`
	Value     int64  `json:"value"`
	Missing   bool   `json:"missing"` // no counter key (an expirable semaphore's permits only)
	TTLMillis *int64 `json:"ttl_ms"`  // null without expiry
	// An expirable semaphore's held permits, first to expire first.
	Permits              []jsonPermit `json:"permits"`
	SemaphoreChannel     string       `json:"semaphore_channel"`
	SemaphoreSubscribers int64        `json:"semaphore_subscribers"`
	LatchChannel         string       `json:"latch_channel"`
	LatchSubscribers     int64        `json:"latch_subscribers"`
}

type jsonPermit struct {
	ID       string     `json:"id"`
	Expiry   *time.Time `json:"expiry"` // null: no lease (Redisson's never-expires score)
	InMillis *int64     `json:"in_ms"`  // expiry - time; negative when overdue
	NoLease  bool       `json:"no_lease"`
}

func countJSON(r *inspect.Report) *jsonCount {
	c := r.Count
	j := &jsonCount{Kind: c.Kind.String(), Value: c.Value, Missing: c.Missing, Permits: []jsonPermit{},
		SemaphoreChannel: c.SemaphoreChannel, SemaphoreSubscribers: c.SemaphoreSubscribers,
		LatchChannel: c.LatchChannel, LatchSubscribers: c.LatchSubscribers}
	if c.Expires {
		ms := c.TTL.Milliseconds()
		j.TTLMillis = &ms
	}
	for _, p := range c.Permits {
		jp := jsonPermit{ID: p.ID, NoLease: p.NoLease}
		if !p.NoLease {
			exp, in := p.Expiry, p.Expiry.Sub(r.Time).Milliseconds()
			jp.Expiry, jp.InMillis = &exp, &in
		}
		j.Permits = append(j.Permits, jp)
	}
	return j
}

type jsonWaitingWriter struct {
	Field    string    `json:"field"`
	Deadline time.Time `json:"deadline"`
	InMillis int64     `json:"in_ms"` // deadline - time; negative when overdue
}

type jsonHolder struct {
	Field    string `json:"field"`
	ClientID string `json:"client_id"`
	OwnerID  string `json:"owner_id"`
	Holds    int64  `json:"holds"`
	// A read-write lock's holders: writer, or a reader's own lease (ms;
	// 0: ran out, -1: no expiry). Absent for other locks.
	Writer          *bool  `json:"writer,omitempty"`
	ReadLeaseMillis *int64 `json:"read_lease_ms,omitempty"`
}

type jsonWaiter struct {
	Field       string     `json:"field"`
	Deadline    *time.Time `json:"deadline"` // null when the waiter has none
	InMillis    *int64     `json:"in_ms"`    // deadline - time; negative when overdue
	Overdue     bool       `json:"overdue"`
	Channel     string     `json:"channel"`
	Subscribers int64      `json:"subscribers"`
}

func toJSON(r *inspect.Report) jsonReport {
	if r.Count != nil {
		return jsonReport{Name: r.Name, Time: r.Time, Exists: true, Holders: []jsonHolder{}, Queue: []jsonWaiter{},
			Count: countJSON(r)}
	}
	j := jsonReport{
		Name: r.Name, Time: r.Time, Exists: exists(r), Locked: r.Locked, Mode: r.Mode, Channel: r.Channel, Subscribers: r.Subscribers,
		Holders: []jsonHolder{}, Queue: []jsonWaiter{},
	}
	if r.Locked && r.Expires {
		ms := r.TTL.Milliseconds()
		j.TTLMillis = &ms
	}
	j.NoExpiry = r.Locked && !r.Expires
	if r.HasToken {
		tok := r.Token
		j.Token = &tok
	}
	for _, h := range r.Holders {
		jh := jsonHolder{Field: h.Field, ClientID: h.ClientID, OwnerID: h.OwnerID, Holds: h.Holds}
		if r.Mode != "" {
			writer, ms := h.Writer, max(h.Lease.Milliseconds(), -1)
			jh.Writer = &writer
			if !writer {
				jh.ReadLeaseMillis = &ms
			}
		}
		j.Holders = append(j.Holders, jh)
	}
	if r.Mode != "" {
		ws := []jsonWaitingWriter{}
		for _, w := range r.WaitingWriters {
			ws = append(ws, jsonWaitingWriter{w.Field, w.Deadline, w.Deadline.Sub(r.Time).Milliseconds()})
		}
		j.WaitingWriters = &ws
	}
	for _, q := range r.Queue {
		w := jsonWaiter{Field: q.Field, Overdue: q.Overdue(r.Time), Channel: q.Channel, Subscribers: q.Subscribers}
		if q.HasDeadline {
			dl := q.Deadline
			in := dl.Sub(r.Time).Milliseconds()
			w.Deadline, w.InMillis = &dl, &in
		}
		j.Queue = append(j.Queue, w)
	}
	return j
}
