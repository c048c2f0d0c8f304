package waiters

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sharded subscriptions. go-redis's own sharded PubSub re-sends all of a
// connection's channels in one SSUBSCRIBE when it reconnects, which a
// cluster refuses (CROSSSLOT) once they span slots, and it reconnects to
// the same address after a failover. So the hub keeps one connection per
// master, subscribes one channel per command, and never lets a sharded
// connection reconnect: any error closes it, and its topics are routed
// again, by a refreshed slot map, after a short backoff.

// healthInterval is how long a sharded connection may stay silent before
// it is pinged; a ping unanswered for as long again closes it.
const healthInterval = 3 * time.Second

// Backoff between routing attempts after failures: doubling from
// minReroute up to maxReroute while failures persist.
const (
	minReroute = 50 * time.Millisecond
	maxReroute = 2 * time.Second
)

// route subscribes t at the master of its channel's slot, opening that
// master's connection if there is none. It runs on the writer.
func (h *Hub) route(ctx context.Context, t *topic) {
	h.mu.Lock()
	live := h.routableLocked(t)
	reload := h.failures > 0
	h.mu.Unlock()
	if !live {
		return
	}
	if reload {
		h.router.ReloadState(ctx)
	}
	node, err := h.router.MasterForKey(ctx, t.channel)
	if err != nil {
		h.mu.Lock()
		h.failures++
		h.rerouteLocked(t)
		h.mu.Unlock()
		return
	}
	addr := node.Options().Addr
	h.mu.Lock()
	if !h.routableLocked(t) {
		h.mu.Unlock()
		return
	}
	sc := h.shards[addr]
	fresh := sc == nil
	if fresh {
		// No I/O: the connection is dialled by the SSUBSCRIBE below.
		sc = &conn{addr: addr, topics: make(map[*topic]bool), ps: node.SSubscribe(context.Background())}
		h.shards[addr] = sc
		h.open[sc] = struct{}{}
	}
	sc.topics[t] = true
	t.shard, t.sOK = sc, false
	h.mu.Unlock()
	if err := sc.ps.SSubscribe(ctx, t.channel); err != nil {
		h.shardFailed(sc)
		return
	}
	if fresh {
		h.wg.Add(1)
		go h.readShard(sc)
	}
}

// routableLocked reports whether t still needs routing. h.mu must be held.
func (h *Hub) routableLocked(t *topic) bool {
	return !h.closed && h.topics[t.channel] == t && t.wantShard && t.shard == nil
}

// rerouteLocked routes t again after the backoff. h.mu must be held.
func (h *Hub) rerouteLocked(t *topic) {
	d := maxReroute
	if n := h.failures - 1; n < 6 {
		d = min(minReroute<<max(n, 0), maxReroute)
	}
	time.AfterFunc(d, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.routableLocked(t) {
			h.queueLocked(op{kind: opRoute, t: t})
		}
	})
}

// sunsubscribe drops channel from sc, closing sc when no topic uses it.
// It runs on the writer.
func (h *Hub) sunsubscribe(ctx context.Context, sc *conn, channel string) {
	h.mu.Lock()
	if sc.dead {
		h.mu.Unlock()
		return
	}
	last := len(sc.topics) == 0
	if last {
		h.forgetShardLocked(sc)
	}
	h.mu.Unlock()
	if last {
		_ = sc.ps.Close()
		return
	}
	_ = sc.ps.SUnsubscribe(ctx, channel)
}

// forgetShardLocked marks sc dead and forgets it. h.mu must be held.
func (h *Hub) forgetShardLocked(sc *conn) {
	sc.dead = true
	if h.shards[sc.addr] == sc {
		delete(h.shards, sc.addr)
	}
	delete(h.open, sc)
}

// shardFailed closes sc after an error (the master failed, the
// connection broke, a reply said the slot is elsewhere) and routes its
// topics again after the backoff.
func (h *Hub) shardFailed(sc *conn) {
	h.mu.Lock()
	if sc.dead {
		h.mu.Unlock()
		return
	}
	h.forgetShardLocked(sc)
	h.failures++
	for t := range sc.topics {
		if t.shard == sc {
			t.shard, t.sOK, t.confirmed = nil, false, false
			h.rerouteLocked(t)
		}
	}
	sc.topics = nil
	h.mu.Unlock()
	_ = sc.ps.Close()
}

// readShard reads sc until it fails or closes.
func (h *Hub) readShard(sc *conn) {
	defer h.wg.Done()
	ctx := context.Background()
	pinged := false
	for {
		m, err := sc.ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				if sc.ps.Ping(ctx) == nil {
					continue
				}
			}
			h.shardFailed(sc)
			return
		}
		pinged = false
		switch m := m.(type) {
		case *redis.Subscription:
			h.shardEvent(sc, m)
		case *redis.Message:
			h.message(m.Channel, m.Payload, fromShard)
		}
	}
}

// shardEvent handles a confirmation or an end of a sharded subscription.
func (h *Hub) shardEvent(sc *conn, m *redis.Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[m.Channel]
	if t == nil || t.shard != sc {
		return // a reply about a topic dropped or routed elsewhere since
	}
	switch m.Kind {
	case "ssubscribe":
		t.sOK = true
		h.failures = 0
		h.confirmLocked(t)
	case "sunsubscribe":
		if !t.sOK {
			// The reply to the SUNSUBSCRIBE of an earlier topic of the
			// channel, sent before this topic's SSUBSCRIBE.
			return
		}
		// Unrequested: the server ended the subscription because the
		// slot left this master. Route it again by a fresh slot map.
		delete(sc.topics, t)
		t.shard, t.sOK, t.confirmed = nil, false, false
		h.failures++
		h.rerouteLocked(t)
		if len(sc.topics) == 0 { // close it, unless a topic is routed there first
			h.queueLocked(op{kind: opSUnsubscribe, c: sc, channel: m.Channel})
		}
	}
}
