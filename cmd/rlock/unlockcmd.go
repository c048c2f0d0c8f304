package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
It never deletes a semaphore's or count-down latch's count: it names the
API that resets one (semaphore.TrySetPermits, AddPermits, DrainPermits;
latch.Delete, TrySetCount). It never deletes a key that is not a lock: a hash whose fields are not
owner fields with hold counts (see inspect), or that has no TTL (every
rlock and Redisson lock has one), is refused as "not a lock". Flags may
come before or after NAME.

Exit status: 0 unlocked, or NAME was not locked; 1 declined, NAME is not a
lock, or a Redis error; 2 bad usage (including no --force, or no --yes
without a terminal); 3 Redis unreachable; 4 Redis refused the connection
(password, database).

Flags:
`

func unlockCmd(ctx context.Context, args []string, e env) error {
	name, conn, yes, err := parseUnlock(args, e)
	if err != nil {
		return err
	}
	rdb, tgt, err := conn.connect(ctx, defaultRedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	tgt.warn(e, "unlock")

	// Read first: never delete a key that is not a lock (inspect.Read
	// refuses it, see inspect.CheckLock), and show the operator whom they
	// are about to dispossess.
	r, err := inspect.Read(ctx, rdb, name, time.Now())
	if err != nil {
		return err
	}
	if r.Count != nil {
		return refuseCount(r)
	}
	if !locked(r, e) {
		return nil
	}
	held := describeHolders(r)
	if !yes {
		if err := confirm(name, held, e); err != nil {
			return err
		}
	}
	return forceUnlockReport(ctx, rdb, r, held, e)
}

// parseUnlock parses unlock's arguments: the lock name, the connection
// flags and --yes; --force is required, and --yes without a terminal.
func parseUnlock(args []string, e env) (name string, conn connFlags, yes bool, err error) {
	fs := newFlagSet("rlock unlock", unlockHelp, e)
	var force bool
	conn.register(fs, defaultRedisURL)
	fs.BoolVar(&force, "force", false, "required: delete the lock whoever holds it")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	pos, err := parse(fs, args)
	if err != nil {
		return "", conn, false, err
	}
	if name, err = lockName(pos); err != nil {
		return "", conn, false, err
	}
	if !force {
		return "", conn, false, usageError("unlock needs --force: it deletes %q whoever holds it (a holder releases its own lock with Unlock)", name)
	}
	if !yes && !e.stdinTTY {
		return "", conn, false, usageError("refusing to force-unlock %q without confirmation: stdin is not a terminal; add --yes", name)
	}
	return name, conn, yes, nil
}

// refuseCount is unlock's answer for a semaphore's or count-down latch's
// count: never deleted here, since deleting it loses permits or releases a
// latch's waiters; it names the documented ways to reset it.
func refuseCount(r *inspect.Report) error {
	c := r.Count
	return fmt.Errorf("%w: key %q holds a count of %d (%s); unlock --force never deletes it. "+
		"Reset a semaphore with semaphore.TrySetPermits, AddPermits or DrainPermits (Redisson: trySetPermits, addPermits, drainPermits), "+
		"release an expirable semaphore's permit with Expirable.Release(id); "+
		"reset a count-down latch with latch.Delete (which releases its waiters) and TrySetCount",
		inspect.ErrNotALock, r.Name, c.Value, c.Kind)
}

// locked reports whether r is held, and says so when it is not.
func locked(r *inspect.Report, e env) bool {
	switch {
	case !exists(r):
		fmt.Fprintf(e.stdout, "No such lock %s (no key and no waiter); nothing to do.\n", r.Name)
		return false
	case !r.Locked:
		fmt.Fprintf(e.stdout, "%s is not locked; nothing to do.\n", r.Name)
		return false
	}
	return true
}

// confirm asks the operator on the terminal.
func confirm(name, held string, e env) error {
	fmt.Fprintf(e.stderr, "Force-unlock %s held by %s? [y/N] ", name, held)
	answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return fmt.Errorf("not unlocked: %q was not confirmed", name)
	}
	return nil
}

// forceUnlockReport deletes lock r if the holders shown still hold it and
// reports the outcome. The question may have taken a while: the holders
// are checked and the lock deleted in one script. A fair lock's force
// unlock wakes the head of its queue; the reentrant one publishes on the
// lock channel.
func forceUnlockReport(ctx context.Context, rdb redis.UniversalClient, r *inspect.Report, held string, e env) error {
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
		fmt.Fprintf(e.stdout, "%s was released before the force-unlock; nothing deleted.\n", r.Name)
		return nil
	case -1:
		now, err := inspect.Read(ctx, rdb, r.Name, time.Now())
		if err != nil {
			return fmt.Errorf("not unlocked: %q changed hands meanwhile; run again", r.Name)
		}
		return fmt.Errorf("not unlocked: %q changed hands meanwhile (now held by %s); run again", r.Name, describeHolders(now))
	}
	fmt.Fprintf(e.stdout, "Force-unlocked %s (was held by %s).\n", r.Name, held)
	notes(r, e)
	return nil
}

// notes tells what a force-unlock woke besides.
func notes(r *inspect.Report, e env) {
	if r.Mode != "" {
		fmt.Fprintf(e.stderr, "note: %s is a Redisson read-write lock (was in %s mode); every waiter was woken. Waiting writers keep their places.\n", r.Name, r.Mode)
	}
	if len(r.Queue) > 0 {
		fmt.Fprintf(e.stderr, "note: %s has a fair queue of %s; the first live one was woken.\n",
			r.Name, plural(int64(len(r.Queue)), "waiter"))
	}
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
