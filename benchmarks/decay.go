package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
)

// runDecay is the -decay mode: on embedded miniredis with real-time TTLs
// (as the demo runs it), a lock+unlock loop of ops operations for the
// floor, for rlock with one handle, for rlock with a new handle per
// operation (as a service that makes a handle per request does: every
// operation is a new owner) and for rlock with one handle and a new
// rlock.WithOwner owner per operation, each on its own miniredis, interleaved in
// tenths of the run, printing the rate of every tenth and the keys left
// on each rlock miniredis. Every key a release leaves behind (a replay
// latch) slows miniredis down, as it scans its keys on every command: a
// rate that falls over the run shows the keys piling up.
func runDecay(ctx context.Context, ops int, out io.Writer) error {
	nodes, err := startNodes(5, true)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	rdbs := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: n.addr})
		defer rdbs[i].Close()
	}
	c, err := rlock.NewClient(rdbs[1])
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := reentrant.New(c, "decay:rlock")
	if err != nil {
		return err
	}
	perOp, err := rlock.NewClient(rdbs[2])
	if err != nil {
		return err
	}
	defer perOp.Close()
	owners, err := rlock.NewClient(rdbs[3])
	if err != nil {
		return err
	}
	defer owners.Close()
	ol, err := reentrant.New(owners, "decay:rlock")
	if err != nil {
		return err
	}
	rp := &redissonFloorProcess{rdb: rdbs[4], once: true}
	rfloor, err := rp.mutex("decay:redisson-floor")
	if err != nil {
		return err
	}
	loops := []struct {
		name string
		m    mutex
	}{
		{"floor", &floorMutex{rdb: rdbs[0], key: "decay:floor", token: randomToken()}},
		{"rlock", &rlockMutex{l}},
		{"rlock, a handle per op", &handlePerOpMutex{c: perOp, name: "decay:rlock"}},
		{"rlock, an owner per op", &ownerPerOpMutex{l: ol}},
		{"exactly-once Redisson-layout floor", rfloor},
	}
	for _, lp := range loops {
		if err := warmUp(ctx, lp.m); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "| ops done | %s ops/s | %s ops/s | %s ops/s | %s ops/s | %s ops/s | keys (rlock) | keys (a handle per op) | keys (an owner per op) |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
		loops[0].name, loops[1].name, loops[2].name, loops[3].name, loops[4].name)
	began := time.Now()
	spent := make([]time.Duration, len(loops))
	var tenths [][]float64 // each tenth's rates
	step := max(ops/10, 1)
	for done := 0; done < ops; done += step {
		rates := make([]float64, len(loops))
		for i, lp := range loops {
			began := time.Now()
			for range step {
				if err := cycle(ctx, lp.m); err != nil {
					return fmt.Errorf("%s: %w", lp.name, err)
				}
			}
			took := time.Since(began)
			spent[i] += took
			rates[i] = float64(step) / took.Seconds()
		}
		tenths = append(tenths, rates)
		keys := make([]int64, 3)
		for i, rdb := range rdbs[1:4] {
			if keys[i], err = rdb.DBSize(ctx).Result(); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %d | %d |\n", done+step, rates[0], rates[1], rates[2], rates[3], rates[4], keys[0], keys[1], keys[2])
	}
	// Each tenth runs the loops one after the other, close in time: the
	// median of the tenths' ratios is robust to a tenth that another
	// process slowed down, which the overall rate is not.
	total := max(ops/step, 1) * step
	fmt.Fprintf(out, "\nOverall (%d ops each, %v in all), ops/s and the median over the tenths of the ratio to the floor's rate in the same tenth:\n\n", total, time.Since(began).Round(time.Second))
	for i, lp := range loops {
		rs := make([]float64, len(tenths))
		for j, t := range tenths {
			rs[j] = t[i] / t[0]
		}
		slices.Sort(rs)
		med := rs[len(rs)/2]
		if len(rs)%2 == 0 {
			med = (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
		}
		fmt.Fprintf(out, "- %s: %.0f ops/s, %.2f× the floor (tenths %.2f-%.2f×)\n", lp.name, float64(total)/spent[i].Seconds(), med, rs[0], rs[len(rs)-1])
	}
	return nil
}

// ownerPerOpMutex takes every lock with one handle and a new explicit
// owner (rlock.WithOwner), as a service that names each request's owner.
type ownerPerOpMutex struct {
	l     *reentrant.Lock
	n     int
	owner string
}

func (m *ownerPerOpMutex) lock(ctx context.Context) error {
	m.n++
	m.owner = "op-" + strconv.Itoa(m.n)
	return m.l.Lock(rlock.WithOwner(ctx, m.owner))
}

func (m *ownerPerOpMutex) unlock(ctx context.Context) error {
	return m.l.Unlock(rlock.WithOwner(ctx, m.owner))
}

// handlePerOpMutex takes every lock with a new handle, so every operation
// is a new owner, as in a service that makes a handle per request.
type handlePerOpMutex struct {
	c    *rlock.Client
	name string
	l    *reentrant.Lock
}

func (m *handlePerOpMutex) lock(ctx context.Context) error {
	l, err := reentrant.New(m.c, m.name)
	if err != nil {
		return err
	}
	m.l = l
	return l.Lock(ctx)
}

func (m *handlePerOpMutex) unlock(ctx context.Context) error { return m.l.Unlock(ctx) }
