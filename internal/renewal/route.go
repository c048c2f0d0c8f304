package renewal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
)

// router groups leases by the node that serves them.
type router interface {
	// group returns one group per node. On a cluster it asks the
	// ClusterClient for each slot's master, which does I/O only before the
	// client has loaded its slot map (never once a lock was taken through
	// it).
	group(ctx context.Context, leases []*Lease) []group
	// slotted reports whether leases need their hash slot.
	slotted() bool
}

// group is the leases one node serves.
type group struct {
	id     string // the node's address, for reports
	target *target
	leases []*Lease
}

// target is how one node is reached.
type target struct {
	scripter redis.Scripter         // the node's client: one call per batch when pipe is nil
	pipe     func() redis.Pipeliner // a pipeline on the node's client
	cluster  *redis.ClusterClient   // on a cluster: batches per slot; redirected batches go through it
	err      error                  // the node could not be found: every batch fails with it
}

// failed is called when a round on the target failed: a cluster reloads its
// slot map (in the background, rate-limited by go-redis), so the retry goes
// to a promoted replica instead of the dead master until a MOVED reply or
// go-redis's own reload interval (60 s by default, longer than a lease).
func (t *target) failed() {
	if t.cluster != nil {
		t.cluster.ReloadState(context.Background())
	}
}

// pipeliner is a client that can pipeline (a *redis.Client, most wrappers).
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

func newRouter(rdb redis.Scripter) router {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return clusterRouter{cc: c}
	case *redis.Ring:
		return ringRouter{ring: c}
	case *redis.Client:
		return single{id: c.Options().Addr, t: &target{scripter: c, pipe: c.Pipeline}}
	}
	t := &target{scripter: rdb}
	if p, ok := rdb.(pipeliner); ok {
		t.pipe = p.Pipeline
	}
	return single{id: "the Redis server", t: t}
}

// single is one server.
type single struct {
	id string
	t  *target
}

func (r single) slotted() bool { return false }

func (r single) group(_ context.Context, leases []*Lease) []group {
	return []group{{id: r.id, target: r.t, leases: leases}}
}

// groups builds the groups of one dispatch, one per node client.
type groups struct {
	byClient map[*redis.Client]*group
	byErr    map[string]*group
	list     []*group
}

func (gs *groups) of(c *redis.Client, err error, t func() *target) *group {
	var g *group
	if err != nil {
		if g = gs.byErr[err.Error()]; g == nil {
			g = &group{id: "an unknown node (" + err.Error() + ")", target: t()}
			g.target.err = err
			gs.byErr[err.Error()] = g
			gs.list = append(gs.list, g)
		}
		return g
	}
	if g = gs.byClient[c]; g == nil {
		g = &group{id: c.Options().Addr, target: t()}
		g.target.scripter, g.target.pipe = c, c.Pipeline
		gs.byClient[c] = g
		gs.list = append(gs.list, g)
	}
	return g
}

func (gs *groups) result() []group {
	out := make([]group, len(gs.list))
	for i, g := range gs.list {
		out[i] = *g
	}
	return out
}

func newGroups() *groups {
	return &groups{byClient: map[*redis.Client]*group{}, byErr: map[string]*group{}}
}

// clusterRouter groups by the master of each hash slot.
type clusterRouter struct{ cc *redis.ClusterClient }

func (r clusterRouter) slotted() bool { return true }

func (r clusterRouter) group(ctx context.Context, leases []*Lease) []group {
	// A counting sort by slot, so that each node's leases come grouped by
	// slot (a script call may touch one slot only).
	start := make([]int, base.SlotCount+1)
	for _, l := range leases {
		start[l.slot+1]++
	}
	for i := 1; i <= base.SlotCount; i++ {
		start[i] += start[i-1]
	}
	next := slices.Clone(start)
	sorted := make([]*Lease, len(leases))
	for _, l := range leases {
		sorted[next[l.slot]] = l
		next[l.slot]++
	}
	gs := newGroups()
	for slot := range base.SlotCount {
		lo, hi := start[slot], start[slot+1]
		if lo == hi {
			continue
		}
		c, err := r.cc.MasterForKey(ctx, sorted[lo].key)
		g := gs.of(c, err, func() *target { return &target{cluster: r.cc} })
		g.leases = append(g.leases, sorted[lo:hi]...)
	}
	return gs.result()
}

// ringRouter groups by each key's shard.
type ringRouter struct{ ring *redis.Ring }

func (r ringRouter) slotted() bool { return false }

func (r ringRouter) group(_ context.Context, leases []*Lease) []group {
	gs := newGroups()
	for _, l := range leases {
		c, err := r.ring.GetShardClientForKey(l.key)
		g := gs.of(c, err, func() *target { return &target{} })
		g.leases = append(g.leases, l)
	}
	return gs.result()
}

// round is one node's renewal of some leases.
type round struct {
	node     *node
	target   *target
	leases   []*Lease // as dispatched; only read once started
	tick     *tick    // the tick it belongs to; nil for a retry
	started  time.Time
	deadline time.Time // started + interval: then it counts as failed
	timedOut bool      // the loop gave up waiting (loop only)
	eval     bool      // send the first call as EVAL: the node may lack the script

	// Written by the round's goroutine, read by the loop once received.
	order    []*Lease      // the leases, in the order of held
	held     []int8        // per lease: 1 renewed, 0 not held, -1 failed
	err      error         // why the failed ones failed
	sent     time.Time     // when the first request was sent
	latency  time.Duration // from sent to the last reply
	trips    int           // requests sent
	answered bool          // some call got a reply (the node has the script now)
}

// batch is one script call: order[lo:hi].
type batch struct{ lo, hi int }

// renew runs the round: every batch in one pipeline where the client can
// pipeline, else one call per batch.
func (r *round) renew(ctx context.Context, size int, leaseArg string) {
	t := r.target
	r.order = r.leases // on a cluster, grouped by slot by the router
	r.held = make([]int8, len(r.order))
	for i := range r.held {
		r.held[i] = -1
	}
	r.sent = time.Now()
	if t.err != nil {
		r.err = t.err
		return
	}
	bs := r.batches(size)
	if t.pipe == nil {
		r.oneByOne(ctx, bs, leaseArg)
	} else {
		r.pipelined(ctx, bs, leaseArg)
	}
}

func (r *round) batches(size int) []batch {
	var out []batch
	perSlot := r.target.cluster != nil
	for lo := 0; lo < len(r.order); {
		hi := lo + 1
		for hi < len(r.order) && hi-lo < size && (!perSlot || r.order[hi].slot == r.order[lo].slot) {
			hi++
		}
		out = append(out, batch{lo, hi})
		lo = hi
	}
	return out
}

// keysArgs returns the script's keys and arguments for b.
func (r *round) keysArgs(b batch, leaseArg string) ([]string, []any) {
	keys, args := make([]string, b.hi-b.lo), make([]any, b.hi-b.lo+1)
	args[0] = leaseArg
	for i, l := range r.order[b.lo:b.hi] {
		keys[i], args[i+1] = l.key, l.fieldArg
	}
	return keys, args
}

// evalSha returns the whole EVALSHA command for b, built from the leases'
// boxed keys and fields (no allocation per key).
func (r *round) evalSha(b batch, leaseArg string) []any {
	n := b.hi - b.lo
	cmd := make([]any, 3+2*n+1)
	cmd[0], cmd[1], cmd[2], cmd[3+n] = "evalsha", lua.Renew.Hash(), n, leaseArg
	for i, l := range r.order[b.lo:b.hi] {
		cmd[3+i], cmd[4+n+i] = l.keyArg, l.fieldArg
	}
	return cmd
}

func (r *round) oneByOne(ctx context.Context, bs []batch, leaseArg string) {
	for _, b := range bs {
		if err := ctx.Err(); err != nil {
			r.record(b, nil, err)
			continue
		}
		keys, args := r.keysArgs(b, leaseArg)
		res, err := lua.Renew.Run(ctx, r.target.scripter, keys, args...).Int64Slice()
		r.trips++
		r.record(b, res, err)
	}
}

// pipelined sends every batch in one pipeline; then, if the server
// answered NOSCRIPT, those batches again in a second one, the first as
// EVAL; then, one by one through the ClusterClient, the batches of slots
// that moved.
func (r *round) pipelined(ctx context.Context, bs []batch, leaseArg string) {
	t := r.target
	cmds := make([]*redis.Cmd, len(bs))
	pipe := t.pipe()
	for i, b := range bs {
		if i == 0 && r.eval {
			// EVAL caches the script for the EVALSHAs behind it (a
			// server runs a pipeline in order): a new node costs no
			// second round trip.
			keys, args := r.keysArgs(b, leaseArg)
			cmds[i] = lua.Renew.Eval(ctx, pipe, keys, args...)
		} else {
			cmds[i] = pipe.Do(ctx, r.evalSha(b, leaseArg)...)
		}
	}
	_, _ = pipe.Exec(ctx)
	r.trips++

	var again []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 && ctx.Err() == nil { // a restarted or flushed server
		pipe = t.pipe()
		keys, args := r.keysArgs(bs[again[0]], leaseArg)
		cmds[again[0]] = lua.Renew.Eval(ctx, pipe, keys, args...)
		for _, i := range again[1:] {
			cmds[i] = pipe.Do(ctx, r.evalSha(bs[i], leaseArg)...)
		}
		_, _ = pipe.Exec(ctx)
		r.trips++
	}
	if t.cluster != nil {
		for i, c := range cmds {
			if isRedirect(c.Err()) && ctx.Err() == nil {
				keys, args := r.keysArgs(bs[i], leaseArg)
				cmds[i] = lua.Renew.Run(ctx, t.cluster, keys, args...)
				r.trips++
			}
		}
	}
	for i, b := range bs {
		res, err := cmds[i].Int64Slice()
		r.record(b, res, err)
	}
}

// record notes one batch's reply.
func (r *round) record(b batch, res []int64, err error) {
	if err == nil && len(res) != b.hi-b.lo {
		err = fmt.Errorf("%w: renewal returned %d results for %d keys", base.ErrUnexpectedReply, len(res), b.hi-b.lo)
	}
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return
	}
	r.answered = true
	for i, v := range res {
		r.held[b.lo+i] = 0
		if v == 1 {
			r.held[b.lo+i] = 1
		}
	}
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}

func isRedirect(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED ") || redis.HasErrorPrefix(err, "ASK ") || redis.HasErrorPrefix(err, "TRYAGAIN")
}
