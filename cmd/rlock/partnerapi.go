package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/latch"
	"github.com/rlock-go/rlock/semaphore"
)

// partnerResult is one partner-API run: calls made, the most calls in
// flight at once (counted in the demo's process, outside Redis), and how
// long the run took after the start line opened.
type partnerResult struct {
	calls, peak int64
	elapsed     time.Duration
	ready       time.Duration // from the first service's arrival to the start line opening
}

// partnerAPI is the demo's semaphore run: every worker of every service
// makes calls calls to a partner API that allows limit concurrent calls.
// Each service first counts down a latch, the start line, and waits on it
// until every service is there. With limited, each call holds a permit of
// one semaphore of limit permits; without, nothing limits the calls. The
// calls in flight are counted by the workers themselves, in this process,
// so the peak is what the partner would have seen.
func partnerAPI(ctx context.Context, tgt *target, cfg demoConfig, limited bool, calls, limit int, stderr io.Writer) (partnerResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	run, services, end, err := startRun(ctx, tgt, cfg.services, stderr)
	if err != nil {
		return partnerResult{}, err
	}
	defer end()
	semName, latchName := run+":partner-api", run+":start-line"
	first, err := latch.New(services[0].rl, latchName)
	if err != nil {
		return partnerResult{}, err
	}
	if _, err := first.TrySetCount(ctx, int64(cfg.services)); err != nil {
		return partnerResult{}, err
	}
	if limited {
		s, err := semaphore.New(services[0].rl, semName)
		if err != nil {
			return partnerResult{}, err
		}
		if _, err := s.TrySetPermits(ctx, limit); err != nil {
			return partnerResult{}, err
		}
	}

	var (
		res            partnerResult
		inFlight       atomic.Int64
		firstErr       error
		once           sync.Once
		arrived, start time.Time
		startOnce      sync.Once
		arriveOnce     sync.Once
	)
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	var wg sync.WaitGroup
	for _, svc := range services {
		wg.Go(func() {
			l, err := latch.New(svc.rl, latchName)
			if err != nil {
				fail(err)
				return
			}
			sem, err := semaphore.New(svc.rl, semName)
			if err != nil {
				fail(err)
				return
			}
			// The start line: this service is ready; wait for the others.
			arriveOnce.Do(func() { arrived = time.Now() })
			if err := l.CountDown(ctx); err != nil {
				fail(err)
				return
			}
			if err := l.Await(ctx); err != nil {
				fail(err)
				return
			}
			startOnce.Do(func() { start = time.Now() })
			var workers sync.WaitGroup
			for range cfg.workers {
				workers.Go(func() {
					for range calls {
						if limited {
							if err := sem.Acquire(ctx, 1); err != nil {
								fail(err)
								return
							}
						}
						n := inFlight.Add(1)
						for p := atomic.LoadInt64(&res.peak); n > p && !atomic.CompareAndSwapInt64(&res.peak, p, n); p = atomic.LoadInt64(&res.peak) {
						}
						time.Sleep(max(cfg.work, time.Millisecond)) // the partner's answer
						inFlight.Add(-1)
						atomic.AddInt64(&res.calls, 1)
						if limited {
							if err := sem.Release(ctx, 1); err != nil {
								fail(err)
								return
							}
						}
					}
				})
			}
			workers.Wait()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return partnerResult{}, firstErr
	}
	if ctx.Err() != nil {
		return partnerResult{}, fmt.Errorf("partner API run did not finish within %v", cfg.timeout)
	}
	res.elapsed, res.ready = time.Since(start), start.Sub(arrived)
	return res, nil
}

// runPartnerAPI runs the partner API without and with the semaphore and
// prints a line for each; it fails when the limited run went over the
// limit.
func runPartnerAPI(ctx context.Context, tgt *target, cfg demoConfig, calls, limit int, e env) error {
	fmt.Fprintf(e.stdout, "\nPartner API allowing %d concurrent calls: %d services x %d workers, %d calls each, behind a start line (a count-down latch).\n\n",
		limit, cfg.services, cfg.workers, calls)
	fmt.Fprintf(e.stdout, "%-10s %8s %8s %10s %12s\n", "limit", "calls", "peak", "over limit", "calls/s")
	var ready time.Duration
	for _, limited := range []bool{false, true} {
		r, err := partnerAPI(ctx, tgt, cfg, limited, calls, limit, e.stderr)
		if err != nil {
			return fmt.Errorf("partner API: %w", err)
		}
		name := "unlimited"
		if limited {
			name = "semaphore"
		}
		over := "no"
		if r.peak > int64(limit) {
			over = "yes"
		}
		fmt.Fprintf(e.stdout, "%-10s %8d %8d %10s %12.0f\n", name, r.calls, r.peak, over, float64(r.calls)/r.elapsed.Seconds())
		ready = max(ready, r.ready)
		if limited && r.peak > int64(limit) {
			return fmt.Errorf("partner API: %d calls at once through a semaphore of %d permits", r.peak, limit)
		}
	}
	fmt.Fprintf(e.stdout, "\nEvery service waited at the start line (it opened at most %v after the first arrived);\n"+
		"through the semaphore, never more than %d calls at once.\n", ready.Round(100*time.Microsecond), limit)
	return nil
}
