// Package waiters is the waiter hub: it multiplexes every blocked Lock call
// of one client onto one pub/sub connection, reference-counted per channel,
// and turns unlock messages into wake-ups.
//
// A Lock call that must wait joins the channel of its lock. The first
// waiter of a channel subscribes; the last one to leave unsubscribes. Every
// waiter gets a signal once the server has confirmed the subscription (so
// it can retry knowing no later unlock can be missed), and after a
// reconnect (messages may have been lost in the gap). An unlock message
// ("0") wakes the longest-waiting waiter of the channel that has no wake-up
// pending (a preferred one first: see Waiter.Prefer), so one release costs
// one retry per client rather than one per waiter; a read-unlock message ("1") wakes them all. Pub/sub is only a
// hint: callers still bound every wait by the lock's remaining TTL.
//
// A release may also designate the clients that wake a waiter (see Tag
// and scripts/designate.lua): the tags it publishes just before the "0",
// two to a message, tell every other hub to drop that "0", so one release
// costs about one retry in all, however many clients wait. A designated hub with no
// waiter left to wake, or whose woken waiter gives the wake-up back
// unused, passes the designation on (see SetDesignation). The second of
// two designated clients is there in case the first is gone: its woken
// waiter is told so (see Waiter.Second), and can tell whether a later
// release came (see Waiter.ReleasedSince) and whom the release named first
// (see Waiter.FirstDesignee). No release depends on its designees being
// alive: a hub that drops a "0" designated for others arms a fallback, and
// without a later release one of its waiters covers for the designees
// (see Waiter.Covering).
//
// On a Redis Cluster the hub can also listen with sharded pub/sub
// (SSUBSCRIBE, Redis 7+), which Redis keeps apart from classic pub/sub
// (see Mode). Sharded subscriptions go to the master of the channel's
// slot, one connection per master that has waiters; the hub follows them
// itself when a master fails over or a slot moves (the server then ends
// the subscription with an unrequested SUNSUBSCRIBE): it reloads the
// client's slot map and subscribes again at the new master, and the
// waiters retry once that is confirmed, as after any resubscription.
package waiters

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// Subscriber opens pub/sub connections. Every go-redis v9 client has it.
type Subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Router is what sharded pub/sub needs of a cluster client: the master of
// a channel's slot, a way to refresh the slot map after a failover or a
// slot move, and a command to probe the servers' support.
// *redis.ClusterClient satisfies it.
type Router interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
	ReloadState(ctx context.Context)
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// Mode is how a hub's waiters listen and how releases publish.
type Mode int

const (
	// Auto: on a Redis Cluster whose servers support sharded pub/sub
	// (PUBSUB SHARDNUMSUB answers; Redis 7+), waiters listen both ways and
	// releases publish both ways, so every peer hears every release
	// whichever way it listens or publishes; elsewhere (a single server,
	// Sentinel, a Ring, miniredis, Redis < 7) it is Classic. The default.
	Auto Mode = iota
	// Sharded: waiters listen with SSUBSCRIBE at the master of the
	// channel's slot and releases publish with SPUBLISH only, so a
	// release's message stays in the lock's shard. Needs a cluster client
	// and Redis 7+; peers that listen classically hear nothing.
	Sharded
	// Classic: SUBSCRIBE and PUBLISH only. On a cluster every message is
	// broadcast to every node; peers that listen sharded hear nothing.
	Classic
)

// String names the mode as the root option's constants do.
func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Sharded:
		return "sharded"
	case Classic:
		return "classic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Hub is the per-client waiter hub. The zero value is not usable; use New.
//
// No caller ever waits for pub/sub I/O: SUBSCRIBE, UNSUBSCRIBE and opening
// or closing connections are queued, in order, for one writer goroutine.
// The order matters: a channel unsubscribed by its last waiter and joined
// again at once is subscribed after the UNSUBSCRIBE.
type Hub struct {
	rdb    Subscriber
	router Router // nil: not a cluster client
	mode   Mode   // as configured
	linger time.Duration
	// perChannel: one pub/sub connection per channel instead of one per
	// hub. Needed for *redis.Ring, which shards channels like keys and
	// cannot open a connection without a channel.
	perChannel bool

	mu      sync.Mutex
	closed  bool
	conns   map[string]*conn   // by connKey
	open    map[*conn]struct{} // connections with a PubSub not yet closed
	topics  map[string]*topic  // by channel
	ops     []op               // queued for the writer
	writing bool               // the writer goroutine runs
	wg      sync.WaitGroup     // writer and reader goroutines

	probeMu sync.Mutex // held while an Auto hub probes the servers

	// How waiters listen and releases publish, once resolved (an Auto
	// hub on a cluster probes the servers once).
	classic bool   // topics subscribe classically
	sharded bool   // topics subscribe sharded
	pub     string // the scripts' publish argument: "c", "s" or "cs"
	// final is pub once resolved, read without h.mu: every script call
	// asks for it, so the resolved answer costs one atomic load.
	final atomic.Pointer[string]

	shards   map[string]*conn // sharded connections, by master address
	failures int              // consecutive sharded routing failures (backoff)

	tag    string                                // this client's designation tag; "" for none
	passOn func(channel string, drop, pass bool) // see SetDesignation
}

// Where a message came from: a hub that listens both ways gets a
// release's messages on two connections, in order on each but not
// across them, so a designation applies to the "0" of its own connection.
const (
	fromClassic = iota
	fromShard
)

// designation is what a topic's connection last heard before an unlock
// message: nothing, a designation of another client only, or of this one
// (first, or second after another client's).
type designation uint8

const (
	undesignated designation = iota
	designatedOther
	designatedMe
	designatedMeSecond
	// designatedFallback: a waiter woken because a release designated
	// other clients and none of them acted within fallbackDelay (see
	// armFallbackLocked); like designatedMeSecond, but never passed on to
	// other clients.
	designatedFallback
)

// fallbackDelay is how long after a designated unlock message for other
// clients a hub with waiters waits for evidence that a designee acted (a
// later unlock message) before one of its waiters looks at the lock (see
// Waiter.Covering); a random part up to as much again is added, so that
// the hubs of many clients do not look at once. Longer than the second
// designee's grace plus its look and attempt, so that a second designee
// covering for the first has taken the lock by then.
const fallbackDelay = 300 * time.Millisecond

// mine reports whether d designates this hub's client.
func (d designation) mine() bool { return d == designatedMe || d == designatedMeSecond }

type conn struct {
	ps   *redis.PubSub // nil until opened (Ring: by the writer)
	refs int           // topics using it

	addr   string          // a sharded connection's master; "" for classic
	topics map[*topic]bool // a sharded connection's topics
	dead   bool            // a sharded connection that failed or closed
}

// op is one queued pub/sub command.
type op struct {
	kind    opKind
	c       *conn
	channel string
	t       *topic // opRoute
}

type opKind int

const (
	opSubscribe    opKind = iota
	opUnsubscribe         // and close the connection if it is per channel and unused
	opOpenRing            // open a Ring connection subscribed to channel
	opRoute               // subscribe a topic sharded at its slot's master
	opSUnsubscribe        // drop a topic from its sharded connection
)

// topic is one subscribed channel. It lives while it has waiters, and
// after its last waiter left until its SUBSCRIBE is confirmed: then at most
// one SUBSCRIBE per channel is ever awaiting its acknowledgement, so an
// acknowledgement always belongs to the channel's current topic.
type topic struct {
	channel   string
	c         *conn     // classic connection; nil if the topic is sharded only
	confirmed bool      // every subscription the topic wants is confirmed
	waiters   []*Waiter // in join order

	// Which confirmations arrived, of the subscriptions the topic wants:
	// classic (c != nil) and sharded (wantShard) on shard once routed.
	cOK       bool
	wantShard bool
	shard     *conn
	sOK       bool

	// A confirmed topic whose last waiter left lingers, still subscribed,
	// for the hub's linger time, so an owner that waits again soon (a fair
	// lock's waiter, a hot lock's) needs no new SUBSCRIBE and no retry on
	// its confirmation. idle is its timer; gen tells a stale timer from
	// the current one; missed records a message (or a resubscription)
	// that arrived while nobody waited, which the next waiter must not
	// miss.
	idle   *time.Timer
	gen    uint64
	missed bool

	heard [2]designation // by fromClassic, fromShard: since the last message
	// firstOf is the tag of the client the pending designation names first
	// (when it names another client first), and releases counts the unlock
	// messages heard; both by fromClassic, fromShard, as heard.
	firstOf  [2]string
	secondOf [2]string // the other client named second, with firstOf
	releases [2]uint64
	// fallback checks, fallbackDelay after an unlock message for other
	// clients, that one of them acted (see armFallbackLocked); fbGen tells
	// a stale timer from the current one.
	fallback *time.Timer
	fbGen    uint64
	// registers: the client's waiters here register it with the lock (see
	// Waiter.Registers), so dropping the topic unregisters it.
	registers bool
	// counting: a semaphore's channel (see JoinCounting).
	counting bool
	// semNamed and semMine, by fromClassic and fromShard as heard: the
	// designations heard since the last count message on a counting
	// channel (see CountingDesignation), and how many named this client.
	semNamed [2]bool
	semMine  [2]int64
	// semWaste is called, without blocking and under the hub's lock, when
	// designations of this client go unused (see JoinCounting).
	semWaste func()
}

// Waiter is one blocked caller's membership in a channel. Receive from C to
// wait for a wake-up; call Leave exactly once when done.
type Waiter struct {
	// C receives a value when the waiter should retry: the subscription was
	// confirmed or re-established, or an unlock message arrived. It never
	// closes.
	C     chan struct{}
	hub   *Hub
	topic *topic
	first bool // an unlock message wakes it before the others (see Prefer)
	// designated: its last wake-up was a designation of this client
	// (designatedMe or designatedMeSecond), which must be passed on if it
	// goes unused (see PassOn, Leave); undesignated otherwise. For a second
	// designation, firstTag is the tag of the client named first, and
	// from and seen say which connection's unlock messages woke it and how
	// many the topic had counted then (see ReleasedSince).
	designated designation
	firstTag   string
	secondTag  string // designatedFallback: the other client named second
	from       int
	seen       uint64
}

// DefaultLinger is how long a channel stays subscribed after its last
// waiter left.
const DefaultLinger = time.Second

// New returns a hub that opens its pub/sub connections through rdb and
// listens as mode says. It does no I/O and starts no goroutine; the first
// Join does. Sharded mode needs a cluster client (a Router): New reports
// base.ErrInvalidArgument otherwise, and for an unknown mode.
func New(rdb Subscriber, mode Mode) (*Hub, error) {
	_, ring := rdb.(*redis.Ring)
	router, _ := rdb.(Router)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		router = nil // only a cluster client routes by slot
	}
	switch {
	case mode < Auto || mode > Classic:
		return nil, fmt.Errorf("%w: unknown pub/sub mode %d", base.ErrInvalidArgument, int(mode))
	case mode == Sharded && router == nil:
		return nil, fmt.Errorf("%w: sharded pub/sub needs a *redis.ClusterClient, not %T", base.ErrInvalidArgument, rdb)
	}
	h := &Hub{
		rdb:        rdb,
		router:     router,
		mode:       mode,
		linger:     DefaultLinger,
		perChannel: ring,
		conns:      make(map[string]*conn),
		open:       make(map[*conn]struct{}),
		topics:     make(map[string]*topic),
		shards:     make(map[string]*conn),
	}
	switch {
	case mode == Classic || (mode == Auto && router == nil):
		h.resolveLocked(true, false)
	case mode == Sharded:
		h.resolveLocked(false, true)
	}
	return h, nil
}

// resolveLocked fixes how the hub listens and publishes. h.mu must be
// held (or h not yet shared).
func (h *Hub) resolveLocked(classic, sharded bool) {
	h.classic, h.sharded = classic, sharded
	switch {
	case classic && sharded:
		h.pub = "cs"
	case sharded:
		h.pub = "s"
	default:
		h.pub = "c"
	}
	pub := h.pub
	h.final.Store(&pub)
}

// probeTimeout bounds the one probe of an Auto hub on a cluster.
const probeTimeout = 5 * time.Second

// resolve makes sure the hub knows how it listens and publishes. An Auto
// hub on a cluster asks the servers once (PUBSUB SHARDNUMSUB, as Redisson
// does): an answer means Redis 7+, both ways; an error reply means no
// sharded pub/sub, classic for good; no answer means classic for now, and
// the next call asks again. h.mu must not be held.
func (h *Hub) resolve(ctx context.Context) {
	if h.final.Load() != nil {
		return
	}
	h.probeMu.Lock() // one probe at a time, without holding h.mu
	defer h.probeMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	if h.final.Load() != nil {
		return
	}
	err := h.router.Do(ctx, "PUBSUB", "SHARDNUMSUB").Err()
	var rerr redis.Error
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.resolveLocked(true, true)
	case errors.As(err, &rerr):
		h.resolveLocked(true, false)
	default:
		h.classic, h.pub = true, "c" // this time only
	}
}

// Publish returns the argument that tells the release scripts how to
// publish: "c" (PUBLISH), "s" (SPUBLISH) or "cs" (both); see
// scripts/publish.lua. The first call of an Auto hub on a cluster probes
// the servers (one round trip, bounded by 5 s, not by ctx's cancellation).
func (h *Hub) Publish(ctx context.Context) string {
	if p := h.final.Load(); p != nil {
		return *p
	}
	h.resolve(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pub
}

func (h *Hub) connKey(channel string) string {
	if h.perChannel {
		return channel
	}
	return ""
}

// Join registers a waiter on channel; the channel's first waiter queues its
// SUBSCRIBE. The waiter's C gets a signal once the server confirms the
// subscription. On a channel still subscribed after its last waiter left
// (lingering), it gets a signal at once if a message or a resubscription
// arrived meanwhile, and none otherwise: every message since the caller's
// last look at the lock reaches it. Join never waits for I/O, except
// that the first one of an Auto hub on a cluster may probe the servers
// (see Publish). A SUBSCRIBE that fails is not fatal: go-redis subscribes
// again when it reconnects, a sharded subscription is routed again, and
// callers bound their waits by the lock's TTL. Join reports false, and
// registers nothing, when the hub is closed.
func (h *Hub) Join(channel string) (*Waiter, bool) {
	h.resolve(context.Background())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	w, _ := h.joinLocked(channel)
	return w, true
}

// JoinIfListening is Join for a channel the hub has already, with waiters
// or lingering; it returns nil, registering nothing, when the hub has not
// (or is closed). A caller that must not miss a message published after
// its next attempt joins so before it; when the channel is missing, it
// may attempt first and then JoinAfter.
func (h *Hub) JoinIfListening(channel string) *Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.topics[channel] == nil {
		return nil
	}
	w, _ := h.joinLocked(channel)
	return w
}

// JoinAfter is Join for a caller that found the channel missing
// (JoinIfListening returned nil) and then attempted: a new channel's
// subscription confirmation signals the waiter, so no message published
// after the attempt is missed; but when the channel appeared meanwhile (a
// waiter of the client joined it), a message it got may have gone to its
// other waiters only, so the waiter gets a signal at once: the caller
// tries again. It reports false, registering nothing, when the hub is
// closed.
func (h *Hub) JoinAfter(channel string) (*Waiter, bool) {
	h.resolve(context.Background())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	w, fresh := h.joinLocked(channel)
	if !fresh {
		w.signal()
	}
	return w, true
}

// joinLocked registers a waiter on channel (see Join) and reports whether
// it created the channel's topic. h.mu must be held and h open.
func (h *Hub) joinLocked(channel string) (*Waiter, bool) {
	w := &Waiter{C: make(chan struct{}, 1), hub: h}
	t := h.topics[channel]
	fresh := t == nil
	if fresh {
		t = h.newTopicLocked(channel)
	}
	w.topic = t
	t.waiters = append(t.waiters, w)
	if t.idle != nil { // lingering: in use again
		t.idle.Stop()
		t.idle = nil
		t.gen++
		if t.missed {
			w.signal()
		}
		t.missed = false
	}
	return w, fresh
}

// newTopicLocked creates the topic of channel and queues its
// subscriptions, classic and sharded as the hub listens. h.mu must be held.
func (h *Hub) newTopicLocked(channel string) *topic {
	t := &topic{channel: channel, wantShard: h.sharded}
	h.topics[channel] = t
	if h.classic || !h.sharded {
		c := h.connLocked(channel)
		c.refs++
		t.c = c
		if c.ps == nil {
			h.queueLocked(op{kind: opOpenRing, c: c, channel: channel})
		} else {
			h.queueLocked(op{kind: opSubscribe, c: c, channel: channel})
		}
	}
	if t.wantShard {
		h.queueLocked(op{kind: opRoute, t: t})
	}
	return t
}

// JoinBehind registers a waiter on channel only if the channel already has
// confirmed waiters; otherwise it returns nil and registers nothing. A
// caller that joins this way queues behind the client's other waiters
// without trying the lock first: the release that wakes them is published
// on a live subscription, and wake-ups go to the longest waiter first.
func (h *Hub) JoinBehind(channel string) *Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if h.closed || t == nil || !t.confirmed || len(t.waiters) == 0 {
		return nil
	}
	w := &Waiter{C: make(chan struct{}, 1), hub: h, topic: t}
	t.waiters = append(t.waiters, w)
	return w
}

// connLocked returns the connection for channel, creating it. A shared
// connection is opened at once (go-redis dials when its reader first
// receives); a Ring connection is left for the writer to open. h.mu must
// be held.
func (h *Hub) connLocked(channel string) *conn {
	key := h.connKey(channel)
	if c := h.conns[key]; c != nil {
		return c
	}
	c := &conn{}
	h.conns[key] = c
	if !h.perChannel {
		h.startLocked(c, h.rdb.Subscribe(context.Background()))
	}
	return c
}

// startLocked makes ps c's connection and starts its reader. h.mu must be
// held.
func (h *Hub) startLocked(c *conn, ps *redis.PubSub) {
	c.ps = ps
	h.open[c] = struct{}{}
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	h.wg.Add(1)
	go h.read(msgs)
}

// queueLocked hands o to the writer, starting it if needed. h.mu must be
// held.
func (h *Hub) queueLocked(o op) {
	h.ops = append(h.ops, o)
	if !h.writing {
		h.writing = true
		h.wg.Add(1)
		go h.write()
	}
}

// write runs queued ops in order until the queue is empty.
func (h *Hub) write() {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		if len(h.ops) == 0 || h.closed {
			h.writing = false
			h.ops = nil
			h.mu.Unlock()
			return
		}
		o := h.ops[0]
		h.ops = h.ops[1:]
		h.mu.Unlock()
		h.do(o)
	}
}

func (h *Hub) do(o op) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch o.kind {
	case opSubscribe:
		_ = o.c.ps.Subscribe(ctx, o.channel) // not fatal: see Join
	case opOpenRing:
		ps := h.rdb.Subscribe(ctx, o.channel) // subscribes, with I/O
		h.mu.Lock()
		if h.closed || o.c.refs == 0 {
			h.mu.Unlock()
			_ = ps.Close()
			return
		}
		h.startLocked(o.c, ps)
		h.mu.Unlock()
	case opRoute:
		h.route(ctx, o.t)
	case opSUnsubscribe:
		h.sunsubscribe(ctx, o.c, o.channel)
	case opUnsubscribe:
		h.mu.Lock()
		ps, closing := o.c.ps, h.perChannel && o.c.refs == 0
		if closing {
			delete(h.open, o.c)
		}
		h.mu.Unlock()
		switch {
		case ps == nil: // a Ring connection never opened
		case closing:
			_ = ps.Close()
		default:
			_ = ps.Unsubscribe(ctx, o.channel)
		}
	}
}

func (h *Hub) read(msgs <-chan any) {
	defer h.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.subscribed(m.Channel)
			}
		case *redis.Message:
			h.message(m.Channel, m.Payload, fromClassic)
		}
	}
}

func (h *Hub) subscribed(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil || t.c == nil {
		return // a resubscription of a channel whose UNSUBSCRIBE is queued
	}
	t.cOK = true
	h.confirmLocked(t)
}

// confirmLocked records that one of t's subscriptions is confirmed: the
// first confirmation, or a resubscription after a reconnect, a failover
// or a slot move. Either way every waiter must retry now, since messages
// may have been missed. h.mu must be held.
func (h *Hub) confirmLocked(t *topic) {
	t.confirmed = (t.c == nil || t.cOK) && (!t.wantShard || t.sOK)
	for _, w := range t.waiters {
		w.signal()
		if w.designated == designatedMeSecond || w.designated == designatedFallback { // retry, not wait for the designees
			w.designated = undesignated
		}
	}
	if !t.confirmed {
		return
	}
	if len(t.waiters) == 0 {
		if t.idle == nil { // its last waiter left before the confirmation
			h.idleLocked(t)
			if t.registers {
				// Its client was registered with the lock before it
				// listened, and a release may have designated it
				// unheard: pass that on (if the lock is free).
				h.passOnLocked(t.channel, false)
			}
		}
		t.missed = true // whoever joins next retries
	}
}

func (h *Hub) message(channel, payload string, from int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t != nil && t.counting {
		h.countingLocked(t, payload, from)
		return
	}
	if first, second, ok := designees(payload); ok {
		h.designatedLocked(t, channel, first, from)
		if second != "" && second != first {
			h.designatedLocked(t, channel, second, from)
		}
		return
	}
	if t == nil {
		return
	}
	heard := t.heard[from]
	t.heard[from] = undesignated
	t.releases[from]++
	if heard == designatedOther {
		if len(t.waiters) > 0 {
			h.armFallbackLocked(t, from) // another client wakes a waiter, unless it is gone
		}
		return
	}
	if len(t.waiters) == 0 {
		t.missed = true
		if heard.mine() {
			h.passOnLocked(channel, true)
		}
		return
	}
	if payload == "1" && !heard.mine() { // read-lock release: every waiter may proceed
		for _, w := range t.waiters {
			w.signal()
		}
		return
	}
	// An unlock message, or a "1" that designates this client (a
	// read-write lock's write release naming the clients with waiting
	// writers): one waiter, a preferred one (a writer) first.
	w := t.wakeFirst(nil)
	if w == nil {
		w = t.wakeOne(nil)
	}
	if w == nil { // every waiter is about to try already
		w = t.waiters[0]
	}
	w.designated = heard // undesignated or this client's: designatedOther returned above
	w.firstTag, w.from, w.seen = t.firstOf[from], from, t.releases[from]
}

// designatedLocked records a designation heard on channel: a release names
// the clients that wake a waiter on the unlock message it publishes next.
// A designation of this hub's client on a channel it no longer listens to
// is passed on at once. h.mu must be held.
func (h *Hub) designatedLocked(t *topic, channel, tag string, from int) {
	switch {
	case tag == h.tag && t == nil:
		h.passOnLocked(channel, true)
	case tag == h.tag && t.heard[from] == designatedOther:
		t.heard[from] = designatedMeSecond
	case tag == h.tag:
		t.heard[from] = designatedMe
	case t != nil && !t.heard[from].mine():
		if t.heard[from] == undesignated {
			t.firstOf[from], t.secondOf[from] = tag, ""
		} else if t.secondOf[from] == "" {
			t.secondOf[from] = tag
		}
		t.heard[from] = designatedOther
	}
}

// armFallbackLocked makes sure that an unlock message t's hub dropped,
// designated for other clients, is not lost when those clients are gone
// (crashed, cut off): if no later unlock message comes on the same
// connection within fallbackDelay (and a random part), one of t's waiters
// is woken to cover for the designees (see Waiter.Covering): it looks at
// the lock, and only if it is free takes them off the registry and tries.
// So a release never depends on its designees being alive; it costs a
// look per client with waiters only when the lock is held longer than
// the delay. h.mu must be held.
func (h *Hub) armFallbackLocked(t *topic, from int) {
	if t.fallback != nil {
		t.fallback.Stop()
	}
	t.fbGen++
	gen, seen := t.fbGen, t.releases[from]
	first, second := t.firstOf[from], t.secondOf[from]
	delay := fallbackDelay + rand.N(fallbackDelay)
	t.fallback = time.AfterFunc(delay, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed || h.topics[t.channel] != t || t.fbGen != gen || t.releases[from] != seen || len(t.waiters) == 0 {
			return
		}
		t.fallback = nil
		w := t.wakeOne(nil)
		if w == nil { // every waiter is about to try already
			return
		}
		w.designated = designatedFallback
		w.firstTag, w.secondTag, w.from, w.seen = first, second, from, seen
	})
}

// passOnLocked asks the client to pass a designation on channel on to
// other clients; drop says this client has no waiter there left. h.mu
// must be held; the callback must not block.
func (h *Hub) passOnLocked(channel string, drop bool) {
	if h.passOn != nil && !h.closed {
		h.passOn(channel, drop, true)
	}
}

// Registers marks the waiter's channel as one whose waiters register
// their client with the lock (a reentrant lock's): when the channel is
// dropped, its last waiter long gone, the client is unregistered (see
// SetDesignation), so that no release designates it meanwhile; and a
// closing client unregisters from it (see Registered). It reports false
// when the hub is closed already: Registered may have been read without
// the channel, and the caller must unregister its client itself.
func (w *Waiter) Registers() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.topic.registers = true
	return !w.hub.closed
}

// SetDesignation makes the hub act on designations (see the package doc):
// tag is its client's (see Tag), and passOn is called, without blocking,
// with pass true when a designation of this client on channel goes
// unused: no waiter to wake (drop is then true: the client has no waiter
// there left), or a woken waiter gave its wake-up back with nobody here to
// take it; and with drop true and pass false when a channel whose waiters
// register their client (Waiter.Registers) is dropped. Call it before the
// first Join.
func (h *Hub) SetDesignation(tag string, passOn func(channel string, drop, pass bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tag, h.passOn = tag, passOn
}

// Tag returns the designation tag of the client whose ID is id: a decimal
// integer from 2 to 999999999, derived from the ID. A release names two
// clients in one message of 19 digits (see designees), which a Redisson
// subscriber of the channel, decoding every message as a Java long and
// acting on 0 and 1 only, ignores. Two clients whose tags collide both act
// on a designation of either: an extra wake-up, never a lost one.
func Tag(id string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return strconv.FormatUint(h.Sum64()%(maxTag-1)+2, 10)
}

// maxTag is the largest tag: nine digits, so that two fit in a Java long.
const maxTag = 999_999_999

// designees reports whether payload is a designation, and whom it names:
// a decimal integer other than 0 and 1 of at most 19 digits. One of 19
// digits starting with "1" names two clients (see pair in
// scripts/designate.lua): the tags in its next nine digits, then in its
// last nine, zeros in front dropped. Any other names the one client whose
// tag it is (second is ""): a release publishes a tag alone when it cannot
// be paired, such as an older rlock client's longer tag. (Such a tag of 19
// digits starting with "1" is read here as two tags of nine digits, which
// at worst match a client's by chance: an extra wake-up. The older client
// reads it as its own.)
func designees(payload string) (first, second string, ok bool) {
	if len(payload) < 1 || len(payload) > 19 || payload == "0" || payload == "1" {
		return "", "", false
	}
	for i := 0; i < len(payload); i++ {
		if payload[i] < '0' || payload[i] > '9' {
			return "", "", false
		}
	}
	if len(payload) == 19 && payload[0] == '1' {
		return strings.TrimLeft(payload[1:10], "0"), strings.TrimLeft(payload[10:], "0"), true
	}
	return payload, "", true
}

// Waiting returns how many of the client's calls wait on channel, and
// whether the hub has the channel at all: with waiters, or lingering after
// its last one left (a channel is dropped only after its linger).
func (h *Hub) Waiting(channel string) (n int, listening bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil {
		return len(t.waiters), true
	}
	return 0, false
}

// Preferred returns how many of the client's calls wait on channel as
// preferred waiters (see Waiter.Prefer): a read-write lock's writers.
func (h *Hub) Preferred(channel string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	if t := h.topics[channel]; t != nil {
		for _, w := range t.waiters {
			if w.first {
				n++
			}
		}
	}
	return n
}

// wakeFirst signals the longest-waiting preferred waiter other than skip
// that has no signal pending, and returns it (nil if there was none).
func (t *topic) wakeFirst(skip *Waiter) *Waiter {
	for _, w := range t.waiters {
		if w != skip && w.first && w.signal() {
			return w
		}
	}
	return nil
}

// Prefer makes an unlock message ("0") wake this waiter before the
// channel's other waiters: a read-write lock's writer, for which the last
// reader's release is meant (a waiting reader could not use it).
func (w *Waiter) Prefer() {
	w.hub.mu.Lock()
	w.first = true
	w.hub.mu.Unlock()
}

// wakeOne signals the longest-waiting waiter other than skip that has no
// signal pending, and returns it (nil if there was none).
func (t *topic) wakeOne(skip *Waiter) *Waiter {
	for _, w := range t.waiters {
		if w != skip && w.signal() {
			return w
		}
	}
	return nil
}

func (w *Waiter) signal() bool {
	select {
	case w.C <- struct{}{}:
		return true
	default:
		return false
	}
}

// Second reports whether the waiter's last wake-up designated its client
// second, after another client (see scripts/designate.lua): the first is
// most likely taking the lock already, and the second is woken in case
// the first is gone, so its waiter should not try at once. It reports
// false for any other wake-up (a resubscription's, which asks every waiter
// to retry, clears it).
func (w *Waiter) Second() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.designated == designatedMeSecond
}

// FirstDesignee returns the tag of the client that the release which
// designated this waiter's client second (see Second) named first; "" if
// it named none first, or after any other wake-up.
func (w *Waiter) FirstDesignee() string {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	if w.designated != designatedMeSecond {
		return ""
	}
	return w.firstTag
}

// Covering reports whether the waiter's last wake-up asks it to cover for
// designees that may be gone: its client was designated second (see
// Second), or a release designated other clients and no later one came
// within fallbackDelay (see armFallbackLocked). Such a waiter looks at
// the lock before it tries, and tries only if the lock is free.
func (w *Waiter) Covering() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.designated == designatedMeSecond || w.designated == designatedFallback
}

// Designees returns the tags of the other clients a covering waiter (see
// Covering) covers for: those to take off the registry when the lock is
// found free. Nil after any other wake-up.
func (w *Waiter) Designees() []string {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	var tags []string
	switch w.designated {
	case designatedMeSecond:
		tags = []string{w.firstTag}
	case designatedFallback:
		tags = []string{w.firstTag, w.secondTag}
	}
	out := tags[:0]
	for _, tag := range tags {
		if tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// ReleasedSince reports whether the hub has heard an unlock message on
// the waiter's channel, on the connection whose message last woke it,
// since that message: the lock was taken and released again meanwhile.
func (w *Waiter) ReleasedSince() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.topic.releases[w.from] > w.seen
}

// PassOn hands a wake-up the waiter received but could not use (the
// attempt it started failed) to the channel's next waiter, a preferred
// one first (see Prefer), or, with none, to whoever joins next; a
// designation with nobody else here to take it goes to other clients (see
// SetDesignation). It never waits for I/O.
func (w *Waiter) PassOn() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handOnLocked(w, false)
}

// PassOnToPreferred hands a wake-up the waiter used without a grant to
// the longest-waiting preferred waiter of its channel (see Prefer) that
// has no wake-up pending, if there is one: a read-write lock's reader
// refused because writers wait for a free lock gives its wake-up to a
// writer of its client, which can take the lock. (Never to a waiter that
// is not preferred, which would be refused as this one was.) It reports
// whether a waiter was woken, and never waits for I/O.
func (w *Waiter) PassOnToPreferred() bool {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.topic.wakeFirst(w) != nil
}

// handOnLocked passes w's unused wake-up to the next waiter of its
// channel, a preferred one first, or marks the channel missed; an unused
// designation goes to other clients (drop: w has left and was the
// client's last waiter there). h.mu must be held.
func (h *Hub) handOnLocked(w *Waiter, drop bool) {
	d := w.designated
	w.designated = undesignated
	next := w.topic.wakeFirst(w)
	if next == nil {
		next = w.topic.wakeOne(w)
	}
	if next != nil {
		next.designated = d
		next.firstTag, next.secondTag, next.from, next.seen = w.firstTag, w.secondTag, w.from, w.seen
		return
	}
	w.topic.missed = true
	if d.mine() {
		h.passOnLocked(w.topic.channel, drop)
	}
}

// Leave removes the waiter from its channel. A wake-up it received but did
// not consume is passed to the next waiter, so a waiter that gives up never
// swallows a release meant for someone. The last waiter of a channel queues
// its UNSUBSCRIBE (once the SUBSCRIBE is confirmed). Leave never waits for
// I/O.
func (w *Waiter) Leave() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	t := w.topic
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			break
		}
	}
	pending := false
	select {
	case <-w.C:
		pending = true
	default:
	}
	if len(t.waiters) == 0 && t.confirmed && !h.closed {
		h.idleLocked(t) // clears missed, so hand on after it
	}
	if pending {
		h.handOnLocked(w, len(t.waiters) == 0)
	}
}

// idleLocked lets t, whose last waiter left, linger before it is dropped.
// h.mu must be held.
func (h *Hub) idleLocked(t *topic) {
	if h.linger <= 0 {
		h.dropLocked(t)
		return
	}
	t.missed = false
	t.gen++
	gen := t.gen
	t.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.closed && h.topics[t.channel] == t && t.gen == gen && len(t.waiters) == 0 {
			t.idle = nil
			h.dropLocked(t)
		}
	})
}

// dropLocked forgets t and queues its UNSUBSCRIBE. h.mu must be held.
func (h *Hub) dropLocked(t *topic) {
	delete(h.topics, t.channel)
	if t.registers && h.passOn != nil && !h.closed {
		h.passOn(t.channel, true, false)
	}
	if sc := t.shard; sc != nil {
		delete(sc.topics, t)
		t.shard = nil
		h.queueLocked(op{kind: opSUnsubscribe, c: sc, channel: t.channel})
	}
	c := t.c
	if c == nil {
		return
	}
	c.refs--
	if h.perChannel && c.refs == 0 {
		delete(h.conns, h.connKey(t.channel))
	}
	h.queueLocked(op{kind: opUnsubscribe, c: c, channel: t.channel})
}

// Registered returns the channels whose waiters register the client with
// their lock (see Waiter.Registers) and that the hub still has, with
// waiters or lingering; also after Close, so that a closing client can
// unregister.
func (h *Hub) Registered() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for ch, t := range h.topics {
		if t.registers {
			out = append(out, ch)
		}
	}
	return out
}

// Stats describes the hub's state, for tests and operators.
type Stats struct {
	Connections int // open pub/sub connections, classic and sharded
	Channels    int // channels with at least one waiter
	Lingering   int // channels still subscribed after their last waiter left
	Waiters     int // registered waiters
}

// Stats returns a snapshot of the hub's state.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Stats{Connections: len(h.conns) + len(h.shards)}
	for _, t := range h.topics {
		s.Waiters += len(t.waiters)
		if len(t.waiters) > 0 {
			s.Channels++
		} else if t.idle != nil {
			s.Lingering++
		}
	}
	return s
}

// Close closes every pub/sub connection and waits for the readers to stop.
// Waiters still registered get no further signals; their callers' waits
// end by their own timers or contexts. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for _, t := range h.topics {
		if t.idle != nil {
			t.idle.Stop()
		}
		if t.fallback != nil {
			t.fallback.Stop()
		}
	}
	open := h.open
	h.open = map[*conn]struct{}{}
	for _, sc := range h.shards {
		sc.dead = true
	}
	h.mu.Unlock()
	for c := range open {
		_ = c.ps.Close()
	}
	h.wg.Wait()
}
