package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/reentrant"
)

// runDecay is the -decay mode: on one embedded miniredis with real-time
// TTLs (as the demo runs it), a lock+unlock loop of ops operations for
// rlock and for the floor, each on its own miniredis, interleaved in
// tenths of the run, printing the rate of every tenth and the keys left
// on rlock's miniredis. Every key a release leaves behind (a replay
// latch) slows miniredis down, as it scans its keys on every command: a
// rate that falls over the run shows the keys piling up.
func runDecay(ctx context.Context, ops int, out io.Writer) error {
	nodes, err := startNodes(2, true)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	floorRdb := redis.NewClient(&redis.Options{Addr: nodes[0].addr})
	defer floorRdb.Close()
	rdb := redis.NewClient(&redis.Options{Addr: nodes[1].addr})
	defer rdb.Close()
	c, err := rlock.NewClient(rdb)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := reentrant.New(c, "decay:rlock")
	if err != nil {
		return err
	}
	fl := &floorMutex{rdb: floorRdb, key: "decay:floor", token: randomToken()}
	loops := []struct {
		name string
		m    mutex
	}{{"floor", fl}, {"rlock", &rlockMutex{l}}}
	for _, lp := range loops {
		if err := warmUp(ctx, lp.m); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "| ops done | %s ops/s | %s ops/s | ratio | keys (rlock) |\n| ---: | ---: | ---: | ---: | ---: |\n", loops[0].name, loops[1].name)
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
			rates[i] = float64(step) / time.Since(began).Seconds()
		}
		keys, err := rdb.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "| %d | %.0f | %.0f | %.2f | %d |\n", done+step, rates[0], rates[1], rates[1]/rates[0], keys)
	}
	return nil
}
