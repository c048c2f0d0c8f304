package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/inspect"
)

const unlockHelp = `Usage: rlock unlock --force [--yes] [flags] NAME

The operator's escape hatch: deletes lock NAME whoever holds it and wakes a
waiter, as ForceUnlock does. The holder is not asked: it learns of the loss
from its watchdog (Done/Err) or at its next Unlock (ErrNotHeld), and may
still be acting on the resource the lock protected. Use it for a lock whose
holder is known to be dead and whose lease would not run out soon enough
(or that has no expiry).

It shows the holder and asks "Force-unlock NAME held by ...? [y/N]" on the
terminal unless --yes is given; without a terminal on stdin it needs --yes.
It never deletes a key that is not a lock. Flags may come before or after
NAME.

Exit status: 0 unlocked, or NAME was not locked; 1 declined, NAME is not a
lock, or a Redis error; 2 bad usage (including no --force, or no --yes
without a terminal); 3 Redis unreachable; 4 Redis refused the connection
(password, database).

Flags:
`

func unlockCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("rlock unlock", unlockHelp, e)
	var (
		conn       connFlags
		force, yes bool
	)
	conn.register(fs, defaultRedisURL)
	fs.BoolVar(&force, "force", false, "required: delete the lock whoever holds it")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	name, err := lockName(pos)
	if err != nil {
		return err
	}
	if !force {
		return usageError("unlock needs --force: it deletes %q whoever holds it (a holder releases its own lock with Unlock)", name)
	}
	if !yes && !e.stdinTTY {
		return usageError("refusing to force-unlock %q without confirmation: stdin is not a terminal; add --yes", name)
	}
	rdb, _, err := conn.connect(ctx, defaultRedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()

	// Read first: never delete a key that is not a lock, and show the
	// operator whom they are about to dispossess.
	r, err := inspect.Read(ctx, rdb, name, time.Now())
	if err != nil {
		return err
	}
	switch {
	case !exists(r):
		fmt.Fprintf(e.stdout, "No such lock %s (no key and no waiter); nothing to do.\n", name)
		return nil
	case !r.Locked:
		fmt.Fprintf(e.stdout, "%s is not locked; nothing to do.\n", name)
		return nil
	}
	// A hash of counters is not a lock even though the lock scripts would
	// treat it as one: every field of a lock is "<clientID>:<ownerID>".
	for _, h := range r.Holders {
		if h.OwnerID == "" {
			return fmt.Errorf("refusing to delete %q: it does not look like a lock (field %q is not <clientID>:<ownerID>)", name, h.Field)
		}
	}
	held := describeHolders(r)
	if !yes {
		fmt.Fprintf(e.stderr, "Force-unlock %s held by %s? [y/N] ", name, held)
		answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return fmt.Errorf("not unlocked: %q was not confirmed", name)
		}
	}

	// The question may have taken a while: the lock is deleted only if the
	// holders shown still hold it, checked and deleted in one script. A
	// fair lock's force unlock wakes the head of its queue; the reentrant
	// one publishes on the lock channel.
	c, err := rlock.NewClient(rdb)
	if err != nil {
		return err
	}
	defer c.Close()
	fields := make([]string, len(r.Holders))
	for i, h := range r.Holders {
		fields[i] = h.Field
	}
	outcome, err := forceUnlock(ctx, c, r, fields)
	if err != nil {
		return err
	}
	switch outcome {
	case 0:
		fmt.Fprintf(e.stdout, "%s was released before the force-unlock; nothing deleted.\n", name)
		return nil
	case -1:
		now, err := inspect.Read(ctx, rdb, name, time.Now())
		if err != nil {
			return fmt.Errorf("not unlocked: %q changed hands meanwhile; run again", name)
		}
		return fmt.Errorf("not unlocked: %q changed hands meanwhile (now held by %s); run again", name, describeHolders(now))
	}
	fmt.Fprintf(e.stdout, "Force-unlocked %s (was held by %s).\n", name, held)
	if r.Mode != "" {
		fmt.Fprintf(e.stderr, "note: %s is a Redisson read-write lock (was in %s mode); every waiter was woken. Waiting writers keep their places.\n", name, r.Mode)
	}
	if len(r.Queue) > 0 {
		fmt.Fprintf(e.stderr, "note: %s has a fair queue of %s; the first live one was woken.\n",
			name, plural(int64(len(r.Queue)), "waiter"))
	}
	return nil
}

// forceUnlock deletes lock r if exactly fields hold it, with the script of
// its kind: a read-write lock's (any mode, wakes every waiter), a fair
// lock's (wakes the head of its queue) or the reentrant lock's.
func forceUnlock(ctx context.Context, c *rlock.Client, r *inspect.Report, fields []string) (int64, error) {
	cc, _ := core.Of(c)
	if r.Mode != "" {
		return cc.ForceUnlockRW(ctx, r.Name, fields...)
	}
	kind := core.Reentrant
	if len(r.Queue) > 0 {
		kind = core.Fair
	}
	l, err := cc.NewLock(r.Name, core.LockConfig{Kind: kind, Lease: rlock.WatchdogMode})
	if err != nil {
		return 0, err
	}
	return l.ForceUnlockHeldBy(ctx, fields)
}

// describeHolders names the holders of a locked lock for the prompt.
func describeHolders(r *inspect.Report) string {
	var parts []string
	for _, h := range r.Holders {
		parts = append(parts, fmt.Sprintf("%s (%s)", h.Field, plural(h.Holds, "hold")))
	}
	s := strings.Join(parts, ", ")
	if s == "" {
		s = "nobody"
	}
	switch {
	case r.Expires:
		s += ", TTL " + roundDur(r.TTL)
	default:
		s += ", no expiry"
	}
	return s
}
