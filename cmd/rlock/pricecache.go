package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/rlock-go/rlock/rwlock"
)

// cacheResult is one price-cache run: reads and writes done, reads that
// saw a half-written price (its two fields disagreeing), and how long.
type cacheResult struct {
	reads, writes, torn int64
	elapsed             time.Duration
}

// priceCache is the demo's read-heavy run: a price kept in two fields of
// one hash (net and gross), rewritten by one writer field by field (not
// atomically: work between the two writes) and read by every worker of
// every service, field by field. With locked, the writer holds the write
// lock and readers the read lock, and no read may see the two fields
// disagree; without, some do.
func priceCache(ctx context.Context, tgt *target, cfg demoConfig, locked bool, writes int, stderr io.Writer) (cacheResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	run, services, end, err := startRun(ctx, tgt, cfg.services, stderr)
	if err != nil {
		return cacheResult{}, err
	}
	defer end()
	key, lockName := run+":price", run+":rwlock"
	if err := services[0].rdb.HSet(ctx, key, "net", 0, "gross", 0).Err(); err != nil {
		return cacheResult{}, err
	}

	var res cacheResult
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	done := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		if err := writePrices(ctx, services[0], key, lockName, locked, writes, cfg.work, &res); err != nil && ctx.Err() == nil {
			fail(err)
		}
	})
	for _, svc := range services {
		for range cfg.workers {
			wg.Go(func() {
				if err := readPrices(ctx, svc, key, lockName, locked, done, &res); err != nil && ctx.Err() == nil {
					fail(err)
				}
			})
		}
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if firstErr != nil {
		return cacheResult{}, firstErr
	}
	if ctx.Err() != nil {
		return cacheResult{}, fmt.Errorf("price cache did not finish within %v", cfg.timeout)
	}
	return res, nil
}

// writePrices sets the price writes times: net, then (after work) gross
// to the same value, under the write lock when locked.
func writePrices(ctx context.Context, svc *service, key, lockName string, locked bool, writes int, work time.Duration, res *cacheResult) error {
	l, err := rwlock.New(svc.rl, lockName)
	if err != nil {
		return err
	}
	for i := 1; i <= writes; i++ {
		if locked {
			if err := l.WriteLock().Lock(ctx); err != nil {
				return err
			}
		}
		err := svc.rdb.HSet(ctx, key, "net", i).Err()
		if err == nil {
			time.Sleep(max(work, time.Millisecond)) // the non-atomic gap a lock must cover
			err = svc.rdb.HSet(ctx, key, "gross", i).Err()
		}
		if locked {
			if uerr := l.WriteLock().Unlock(ctx); err == nil {
				err = uerr
			}
		}
		if err != nil {
			return err
		}
		atomic.AddInt64(&res.writes, 1)
		time.Sleep(max(work, time.Millisecond)) // readers' turn: writes are occasional
	}
	return nil
}

// readPrices reads the price field by field until done closes, under the
// read lock when locked, counting reads whose fields disagree.
func readPrices(ctx context.Context, svc *service, key, lockName string, locked bool, done <-chan struct{}, res *cacheResult) error {
	l, err := rwlock.New(svc.rl, lockName)
	if err != nil {
		return err
	}
	for {
		select {
		case <-done:
			return nil
		default:
		}
		if locked {
			if err := l.ReadLock().Lock(ctx); err != nil {
				return err
			}
		}
		net, err := svc.rdb.HGet(ctx, key, "net").Result()
		var gross string
		if err == nil {
			gross, err = svc.rdb.HGet(ctx, key, "gross").Result()
		}
		if locked {
			if uerr := l.ReadLock().Unlock(ctx); err == nil {
				err = uerr
			}
		}
		if err != nil {
			return err
		}
		atomic.AddInt64(&res.reads, 1)
		if net != gross {
			atomic.AddInt64(&res.torn, 1)
		}
	}
}

// runPriceCache runs the price cache without and with the read-write lock
// and prints a line for each; it fails when a locked read saw a torn price.
func runPriceCache(ctx context.Context, tgt *target, cfg demoConfig, writes int, e env) error {
	fmt.Fprintf(e.stdout, "\nPrice cache: %d services x %d readers, 1 writer making %d updates of two fields each.\n\n",
		cfg.services, cfg.workers, writes)
	fmt.Fprintf(e.stdout, "%-10s %8s %8s %10s %12s\n", "lock", "reads", "writes", "torn reads", "reads/s")
	for _, locked := range []bool{false, true} {
		r, err := priceCache(ctx, tgt, cfg, locked, writes, e.stderr)
		if err != nil {
			return fmt.Errorf("price cache: %w", err)
		}
		name := "no lock"
		if locked {
			name = "rwlock"
		}
		fmt.Fprintf(e.stdout, "%-10s %8d %8d %10d %12.0f\n", name, r.reads, r.writes, r.torn, float64(r.reads)/r.elapsed.Seconds())
		if locked && r.torn > 0 {
			return fmt.Errorf("price cache: %s reads saw a half-written price under the read lock", strconv.FormatInt(r.torn, 10))
		}
	}
	fmt.Fprintln(e.stdout, "\nWith the read-write lock, no reader saw a half-written price.")
	return nil
}

// startRun starts n services (each its own clients) for one demo run,
// whose keys all start with the run name it returns. end closes the
// services' locks, deletes the run's keys (within 10 s, also after ctx
// ended; a failure is reported on stderr) and closes their connections. On
// error, the services already started have been ended.
func startRun(ctx context.Context, tgt *target, n int, stderr io.Writer) (run string, services []*service, end func(), err error) {
	run = "rlock-demo:" + uuid.NewString()
	end = func() {
		for _, s := range services {
			s.closeLocks()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		rdb := tgt.newClient()
		if err := deleteRunKeys(cctx, rdb, run); err != nil {
			fmt.Fprintf(stderr, "rlock demo: could not delete the keys *%s* on %s: %v\n", run, tgt.where, err)
		}
		_ = rdb.Close()
		for _, s := range services {
			s.closeConns()
		}
	}
	for range n {
		s, err := newService(tgt, nil)
		if err != nil {
			end()
			return "", nil, nil, err
		}
		services = append(services, s)
	}
	return run, services, end, nil
}
