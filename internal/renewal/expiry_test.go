package renewal

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The cohorts report a lease as run out exactly when its own expiry (or,
// for leases added within addMerge of each other, up to addMerge earlier)
// has passed, through any mix of adds, renewals and stops; all stays the
// set of registered leases.
func TestCohortsTrackEveryExpiry(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		s := &Scheduler{}
		t0 := time.Now()
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
		want := map[*Lease]time.Time{} // the lease's own expiry
		var live []*Lease
		for range 300 {
			switch op := rng.IntN(10); {
			case op < 5 || len(live) == 0: // add, expiry near the previous ones
				l := &Lease{pos: -1}
				exp := at(1000 + rng.IntN(20))
				s.register(l, exp)
				want[l] = exp
				live = append(live, l)
			case op < 8: // a round renews a few leases to a later expiry
				c := newCohort(at(1100 + rng.IntN(50)))
				for range 1 + rng.IntN(5) {
					l := live[rng.IntN(len(live))]
					if c.expires.After(want[l]) && l.c != c {
						s.moveTo(l, c)
						want[l] = c.expires
					}
				}
			default: // stop one
				i := rng.IntN(len(live))
				s.unregister(live[i])
				delete(want, live[i])
				live = append(live[:i], live[i+1:]...)
			}
		}
		if len(s.all) != len(want) {
			t.Fatalf("all has %d leases, want %d", len(s.all), len(want))
		}
		for now := 990; now <= 1200; now += 7 {
			for _, l := range s.popExpired(at(now)) {
				exp, ok := want[l]
				if !ok {
					t.Fatal("a stopped or reported lease was reported")
				}
				if exp.After(at(now).Add(addMerge)) {
					t.Fatalf("reported at %d ms, runs out at %v", now, exp.Sub(t0))
				}
				delete(want, l)
			}
			for l, exp := range want {
				if !exp.After(at(now)) {
					t.Fatalf("not reported at %d ms, ran out at %v (pos %d)", now, exp.Sub(t0), l.pos)
				}
			}
		}
		if len(want) != 0 || len(s.all) != 0 || len(s.cohorts) != 0 {
			t.Fatalf("left: %d leases, %d registered, %d cohorts", len(want), len(s.all), len(s.cohorts))
		}
	}
}

// The watch keeps every lease it was handed in the bucket of its until
// (rounded up to watchGrain), through any mix of hand-overs and stops:
// each bucket in the map and the heap, its leases pointing back at it,
// and a stopped lease in none.
func TestWatchTracksEveryLease(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := &Scheduler{}
	defer s.closeWatch()
	far := time.Now().Add(time.Hour).UnixNano() // the timer never fires
	var live []*Lease
	for range 5000 {
		if rng.IntN(3) > 0 || len(live) == 0 {
			l := &Lease{s: s}
			l.armed.Store(true)
			l.until.Store(far + rng.Int64N(int64(20*watchGrain)))
			s.watch.mu.Lock()
			s.watchLocked(l, l.until.Load())
			s.watch.mu.Unlock()
			live = append(live, l)
			continue
		}
		i := rng.IntN(len(live))
		live[i].end()
		if live[i].wb != nil {
			t.Fatal("a stopped lease is still watched")
		}
		live = append(live[:i], live[i+1:]...)
	}
	x := &s.watch
	n := 0
	for i, b := range x.heap {
		if b.idx != i || x.buckets[b.at] != b || len(b.leases) == 0 {
			t.Fatalf("bucket %d: idx %d, in map %v, %d leases", i, b.idx, x.buckets[b.at] == b, len(b.leases))
		}
		if i > 0 && x.heap[(i-1)/2].at > b.at {
			t.Fatal("the heap is out of order")
		}
		for j, l := range b.leases {
			g := int64(watchGrain)
			if l.wb != b || l.wi != j || b.at != (l.until.Load()+g-1)/g*g {
				t.Fatalf("lease %d of bucket %d is out of place", j, i)
			}
		}
		n += len(b.leases)
	}
	if n != len(live) || len(x.buckets) != len(x.heap) {
		t.Fatalf("%d leases watched in %d buckets (%d in the map), %d live", n, len(x.heap), len(x.buckets), len(live))
	}
	if x.timerAt == 0 || x.timerAt > x.heap[0].at {
		t.Fatal("the timer is not set for the first bucket")
	}
}
