package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

// This file runs the locks made of other locks, MultiLock (all mode and
// quorum mode) and RedLock, under the holder-vs-server check, over three
// independent servers (three redis-server processes, or three
// miniredis), each behind a fault-injection proxy.
//
// What a claim of these kinds means (what the check compares):
//
//   - MultiLock, all mode, over members m1..mn: Err nil and Until ahead
//     say that the owner holds every member until Until: each member's
//     owner field is in its hash, with a TTL covering Until (less the
//     clock tolerance).
//   - MultiLock, quorum mode WithQuorum(k): the same on at least k of the
//     n members; the others may be down, frozen, lost or never granted.
//   - RedLock over n servers: a quorum MultiLock with k = n/2+1 whose
//     members are the lock's key on each server, each with the owner
//     field of that server's client.
//
// A member on a server the sampler cannot read (frozen, behind an outage)
// gets no verdict; the claim is judged when at least k members were read,
// and then at least k of those read must cover Until: a handle that counts
// a frozen or unreachable node among its quorum once its hold there may
// have run out is caught by the others failing to make up the quorum.
// Conversely every member hold the servers show is claimed by its
// worker's handle, or a call of that worker is in flight, or it ends
// within the slack of the handle's last Until (the Orphan half).

// multiKind is one kind of lock over the three nodes.
type multiKind struct {
	name   string
	quorum int // 0: all mode
	redis  bool
}

var multiKinds = []multiKind{
	{name: "multilock_all"},
	{name: "multilock_quorum", quorum: 2},
	{name: "redlock", quorum: 2, redis: true},
}

// multiHandle is what a worker uses of a MultiLock or a RedLock.
type multiHandle interface {
	rlock.LeaseLocker
	SetLease(ctx context.Context, lease time.Duration) error
	Done() <-chan struct{}
	Err() error
	Until() time.Time
}

// multiRig is one run of a multiKind through one fault.
type multiRig struct {
	t       *testing.T
	kind    multiKind
	fault   string
	nodes   []*redistest.Backend
	proxies []*redistest.Proxy
	name    string
	lease   time.Duration
	workers []*multiWorker
	claims  *claimCheck
	inside  chan int // a worker entered its critical section
}

type multiWorker struct {
	id                   int
	l                    multiHandle
	owner                context.Context
	act                  activity
	rng                  *rand.Rand
	acquired, lost, errs int
}

// multiNodes returns three independent servers of b's kind.
func multiNodes(t *testing.T, b *redistest.Backend) []*redistest.Backend {
	nodes := []*redistest.Backend{b}
	for len(nodes) < 3 {
		if b.IsMini() {
			nodes = append(nodes, redistest.Mini(t))
		} else {
			nodes = append(nodes, redistest.Real(t))
		}
	}
	return nodes
}

// newMultiRig builds four workers, each with a client of its own per node
// (through the node's proxy) and a handle of kind k, and the check.
func newMultiRig(t *testing.T, b *redistest.Backend, k multiKind, fault string) *multiRig {
	r := &multiRig{t: t, kind: k, fault: fault, nodes: multiNodes(t, b), name: redistest.Name(t), lease: time.Second, inside: make(chan int, 1)}
	var direct []redis.UniversalClient
	for _, n := range r.nodes {
		r.proxies = append(r.proxies, redistest.NewProxy(t, n.Addr))
		// The sampler reads each server directly, with a short timeout so
		// that a frozen one costs a sample little.
		direct = append(direct, n.NewClient(t, func(o *redis.Options) {
			o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, -1
		}))
	}
	// A member attempt whose reply comes after its MultiLock gave up (a
	// slow or cut-off node) may take the member after the rollback's
	// release passed it: nobody claims that hold, and it lives its first
	// lease unrenewed. So an orphan here may last a whole lease (plus the
	// same 300 ms), not half of one as for single locks (seen once in
	// TestFaultMultiSlowNode/multilock_all/miniredis: 998 ms).
	r.claims = newClaimCheck(t, r.lease+300*time.Millisecond, direct...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("%s: seed %d, 4 workers over %d nodes, watchdog lease %v", k.name, seed, len(r.nodes), r.lease)
	for i := range 4 {
		w := &multiWorker{id: i, owner: rlock.WithOwner(context.Background(), "worker-"+strconv.Itoa(i)),
			rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		var clients []*rlock.Client
		var members []rlock.Locker
		c := &claim{label: fmt.Sprintf("worker %d's %s", i, k.name), act: &w.act, quorum: k.quorum, orphans: true}
		for j, n := range r.nodes {
			rdb := n.NewClient(t, func(o *redis.Options) {
				o.Addr = r.proxies[j].Addr()
				o.ReadTimeout, o.WriteTimeout = 250*time.Millisecond, 250*time.Millisecond
				o.MaxRetries = -1 // a lost reply is an unknown outcome the library settles
			})
			cl := newTestClient(t, rdb, rlock.WithWatchdogLease(r.lease))
			clients = append(clients, cl)
			name := r.name
			if !k.redis {
				name = r.name + ":" + strconv.Itoa(j)
			}
			m, err := reentrant.New(cl, name)
			require.NoError(t, err)
			members = append(members, m)
			field, err := m.Owner(w.owner)
			require.NoError(t, err)
			c.members = append(c.members, member{server: j, name: name, field: field})
		}
		var err error
		switch {
		case k.redis:
			w.l, err = redlock.New(clients, r.name)
		case k.quorum > 0:
			w.l, err = multilock.New(members, multilock.WithQuorum(k.quorum))
		default:
			w.l, err = multilock.New(members)
		}
		require.NoError(t, err)
		c.h = w.l
		r.claims.add(c)
		r.workers = append(r.workers, w)
	}
	return r
}

// run runs the workers for rounds rounds each (and, with strikes, on
// until inject returns: it strikes a set number of times), sampling
// throughout; then heals, reports the check and checks
// that no member is left held.
func (r *multiRig) run(rounds int, strikes bool, inject func(stop <-chan struct{}), heal func()) {
	t := r.t
	stop := make(chan struct{})
	injected := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds || strikes && !closed(injected); i++ {
				r.round(w)
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		r.claims.run(stop, claimEvery)
	}()
	if inject != nil {
		inject(stop)
	}
	close(injected)
	<-stop
	<-sampled
	if heal != nil {
		heal()
	}
	acquired, lost, errs := 0, 0, 0
	for _, w := range r.workers {
		acquired += w.acquired
		lost += w.lost
		errs += w.errs
		require.Positive(t, w.acquired, "worker %d never held the lock", w.id)
	}
	samples, violations := r.claims.report(t, r.kind.name)
	t.Logf("%s: %d holding periods, %d losses told, %d calls failed", r.kind.name, acquired, lost, errs)
	report(row{fault: r.kind.name + ": " + r.fault,
		backend: r.nodes[0].Name, clients: len(r.workers), acquisitions: acquired, lost: lost,
		tokensChecked: false, claimSamples: samples, claimViolations: violations, claimChecked: true})
	ctx := context.Background()
	for j, n := range r.nodes {
		rdb := n.Universal(t)
		require.Eventually(t, func() bool {
			keys, err := rdb.Keys(ctx, r.name+"*").Result()
			for _, k := range keys {
				if typ, _ := rdb.Type(ctx, k).Result(); typ == "hash" {
					return false
				}
			}
			return err == nil
		}, 3*r.lease+5*time.Second, 10*time.Millisecond, "a lock is left held on node %d", j)
	}
}

// round is one holding period: Lock (watchdog mode, or 1 in 4 an
// explicit lease), a critical section of up to 20 ms cut short by Done,
// now and then a SetLease inside it, then Unlock.
func (r *multiRig) round(w *multiWorker) {
	ctx, cancel := context.WithTimeout(w.owner, 3*time.Second)
	defer cancel()
	end := w.act.begin(false)
	var err error
	if w.rng.IntN(4) == 0 {
		err = w.l.LockLease(ctx, 800*time.Millisecond)
	} else {
		err = w.l.Lock(ctx)
	}
	end()
	if err != nil {
		w.errs++
		sleepOrStop(10*time.Millisecond, nil) // a pause before the next round
		return
	}
	w.acquired++
	done := w.l.Done()
	select {
	case r.inside <- w.id:
	default:
	}
	lost := w.section(done, 20*time.Millisecond)
	if !lost && w.rng.IntN(3) == 0 {
		end := w.act.begin(true)
		if w.l.SetLease(w.owner, 600*time.Millisecond) != nil {
			w.errs++
		}
		end()
		lost = w.section(done, 20*time.Millisecond)
	}
	if lost || closed(done) { // before Unlock, which closes Done too
		w.lost++
	}
	end = w.act.begin(true)
	if w.l.Unlock(w.owner) != nil {
		w.errs++
	}
	end()
}

// section works for up to d, and reports whether done closed meanwhile.
func (w *multiWorker) section(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(time.Duration(w.rng.Int64N(int64(d) + 1)))
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// waitInside waits until a worker is in its critical section, or stop.
func (r *multiRig) waitInside(stop <-chan struct{}) bool {
	select {
	case <-r.inside:
	default:
	}
	select {
	case <-r.inside:
		return true
	case <-stop:
		return false
	}
}

// multiRounds is the rounds per worker of a MultiLock or RedLock run: 4,
// or 8 in the long form.
func multiRounds() int {
	if long() {
		return 8
	}
	return 4
}

// TestFaultMultiLostReplies: every 25 ms each node's proxy drops the
// reply of its next script call (acquire, release, renewal, SetLease)
// after the server ran it; go-redis' retries are off, so each is an
// unknown outcome for the member, which the library settles.
func TestFaultMultiLostReplies(t *testing.T) {
	for _, k := range multiKinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				r := newMultiRig(t, b, k, "reply lost, retries off")
				dropped := 0
				r.run(multiRounds(), false, func(stop <-chan struct{}) {
					every(25*time.Millisecond, stop, func() {
						for _, p := range r.proxies {
							if p.Dropped() < maxDrops/3 {
								p.DropReplies("evalsha", 1)
							}
						}
					})
					for _, p := range r.proxies {
						p.DropReplies("", 0)
						dropped += p.Dropped()
					}
				}, nil)
				t.Logf("replies dropped: %d", dropped)
				require.Positive(t, dropped)
			})
		})
	}
}

// TestFaultMultiSlowNode: node 0 answers slowly (30 ms each way, against
// 250 ms client timeouts and renewals every 333 ms).
func TestFaultMultiSlowNode(t *testing.T) {
	for _, k := range multiKinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				r := newMultiRig(t, b, k, "slow node")
				r.proxies[0].SetLatency(30 * time.Millisecond)
				r.run(multiRounds(), false, nil, func() { r.proxies[0].SetLatency(0) })
			})
		})
	}
}

// TestFaultMultiNodeOutage: node 0 is unreachable (its proxy a black
// hole) for 1.3 s, past the 1 s lease, while a worker holds; strikes() times. An
// all-mode holder must be told it lost the lock; a quorum holder may go
// on with the two other nodes but must not count node 0.
func TestFaultMultiNodeOutage(t *testing.T) {
	for _, k := range multiKinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				r := newMultiRig(t, b, k, "node outage past the lease")
				struck, want := 0, strikes()
				r.run(multiRounds(), true, func(stop <-chan struct{}) {
					for struck < want && r.waitInside(stop) {
						r.proxies[0].Blackhole(true)
						sleepOrStop(1300*time.Millisecond, nil)
						r.proxies[0].Blackhole(false)
						struck++
						if sleepOrStop(200*time.Millisecond, stop) {
							return
						}
					}
				}, func() { r.proxies[0].Blackhole(false) })
				require.Equal(t, want, struck)
			})
		})
	}
}

// TestFaultMultiNodeFrozen: node 0's redis-server is stopped with SIGSTOP
// for 1.5 s, past the 1 s lease, while a worker holds; strikes() times. The sampler
// cannot read it meanwhile: the claim is judged on the other two nodes.
func TestFaultMultiNodeFrozen(t *testing.T) {
	for _, k := range multiKinds {
		t.Run(k.name, func(t *testing.T) {
			b := redistest.Real(t)
			r := newMultiRig(t, b, k, "node frozen past the lease")
			struck, want := 0, strikes()
			r.run(multiRounds(), true, func(stop <-chan struct{}) {
				for struck < want && r.waitInside(stop) {
					b.Real.Freeze()
					sleepOrStop(1500*time.Millisecond, nil)
					b.Real.Thaw()
					struck++
					if sleepOrStop(200*time.Millisecond, stop) {
						return
					}
				}
			}, b.Real.Thaw)
			require.Equal(t, want, struck)
		})
	}
}
