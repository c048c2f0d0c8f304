package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/lua"
)

// waitsOnPipeliner reports whether an attempt whose ctx can end waits for
// its reply from the client's auto-pipeliner on the caller's goroutine
// (see attemptPipelined) rather than hand the attempt to a background
// worker: with auto-pipelining on, while other script calls are in flight
// (a lone call costs less handed to a parked worker that calls Redis
// directly, see busy), except on a cluster (whose script calls follow
// redirects and fail-overs in run and the replica syncer), and when the
// script would go without WAIT (no replica sync, or a master that had no
// replica when last asked).
func (c *Client) waitsOnPipeliner() bool {
	return c.pipeliner != nil && c.inFlight.Load() > 0 && !isCluster(c.rdb) && (c.sync == nil || c.sync.Unwaited())
}

// attemptPipelined is attempt for a client whose auto-pipeliner carries
// the script (see waitsOnPipeliner). The auto-pipeliner's goroutine does
// the I/O, so the caller can wait for the reply, or for ctx, on its own
// goroutine, with no hand-off to a worker and back. When ctx ends first,
// the attempt is concluded in the background, as attempt's are: its
// owner's semaphore goes with it, and a grant is released again. An owner
// with an earlier call to settle first (which waits for Redis) goes to a
// worker instead.
func (l *Lock) attemptPipelined(ctx context.Context, o *ownerState, req request) (outcome, error) {
	if err := o.acquire(ctx); err != nil {
		return outcome{}, l.ctxErr(ctx)
	}
	if o.toSettle(req.retrying) {
		o.release()
		return l.attemptOnWorker(ctx, o, req)
	}
	if err := l.prepare(ctx, o, req.retrying); err != nil {
		o.release()
		return outcome{}, err
	}
	at := sentAttempt{req: req, lease: l.c.leaseOf(req.lease), sent: time.Now()}
	call := l.kind.acquire(o.key.field, o.count, at.lease, req.queueing(), l.c.publishArg(ctx), l.c.registration(req))
	p, err := l.c.submit(detached(ctx), call)
	if err != nil { // nothing was sent
		o.release()
		return outcome{}, fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
	}
	if !p.wait(ctx) {
		l.concludeLate(ctx, o, at, p)
		return outcome{}, l.ctxErr(ctx)
	}
	defer o.release()
	rep, err := acquireReplyOf(p.cmd)
	return l.conclude(ctx, o, at, rep, err)
}

// concludeLate concludes in the background an attempt whose caller left
// when ctx ended, before its reply came: the caller's semaphore on o passes
// to it. A grant is released again, a lost reply settled. While the client
// closes, the attempt is concluded on the calling goroutine instead.
func (l *Lock) concludeLate(ctx context.Context, o *ownerState, at sentAttempt, p *pendingScript) {
	var state atomic.Int32
	state.Store(attemptAbandoned)
	at.state = &state
	l.c.retain(o)
	finish := func() {
		defer l.c.putOwner(o)
		defer o.release()
		p.wait(context.Background())
		rep, err := acquireReplyOf(p.cmd)
		_, _ = l.conclude(ctx, o, at, rep, err)
	}
	if !l.c.goBackground(finish) {
		finish()
	}
}

// pendingScript is a script call handed to the client's auto-pipeliner,
// whose reply one goroutine may wait for and another take over.
type pendingScript struct {
	c      *Client
	ap     *redis.AutoPipeliner
	ctx    context.Context // the call's, never ending
	call   scriptCall
	cmd    *redis.Cmd // the command last sent; its reply is in once wait reported true
	future redis.AutoFuture
	eval   bool // sent again with EVAL after a NOSCRIPT reply
	done   bool // the reply is in
}

// submit hands call to the auto-pipeliner as EVALSHA, counted in flight
// (see busy) until its reply is in. ctx must not end (see detached).
func (c *Client) submit(ctx context.Context, call scriptCall) (*pendingScript, error) {
	ap, err := c.pipeliner()
	if err != nil {
		return nil, err
	}
	c.inFlight.Add(1)
	p := &pendingScript{c: c, ap: ap, ctx: ctx, call: call}
	p.send("evalsha", call.script.Hash())
	return p, nil
}

// send submits the script call as EVALSHA (with the script's digest) or
// EVAL (with its source).
func (p *pendingScript) send(name, script string) {
	args := make([]any, 0, 3+len(p.call.keys)+len(p.call.args))
	args = append(args, name, script, len(p.call.keys))
	for _, k := range p.call.keys {
		args = append(args, k)
	}
	args = append(args, p.call.args...)
	p.cmd = redis.NewCmd(p.ctx, args...)
	p.cmd.SetFirstKeyPos(3)
	p.future = p.ap.Submit(p.ctx, p.cmd)
}

// wait waits for the reply until ctx ends, and reports whether it came. A
// NOSCRIPT reply (the server's script cache is empty: the script did not
// run) sends the call again with EVAL, whose reply it then waits for.
func (p *pendingScript) wait(ctx context.Context) bool {
	for !p.done {
		err := p.future.WaitContext(ctx)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return false // a reply that came at the same moment is taken over
		}
		if !p.eval && isReply(err, "NOSCRIPT") {
			p.eval = true
			p.send("eval", lua.Source(p.call.script))
			continue
		}
		p.done = true
		p.c.inFlight.Add(-1)
	}
	return true
}
