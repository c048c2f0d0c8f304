package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/reentrant"
)

type demoConfig struct {
	redisURL string
	services int
	workers  int
	stock    int
	maxQty   int
	work     time.Duration
	timeout  time.Duration
	progress bool
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rlock demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg demoConfig
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis URL (redis://host:port/db); default: an embedded miniredis")
	fs.IntVar(&cfg.services, "services", 4, "simulated services, each with its own Redis and rlock client")
	fs.IntVar(&cfg.workers, "workers", 8, "workers per service ordering concurrently")
	fs.IntVar(&cfg.stock, "stock", 100, "units of stock at the start of each run")
	fs.IntVar(&cfg.maxQty, "max-qty", 3, "largest order; each order is 1..max-qty units")
	fs.DurationVar(&cfg.work, "work", 2*time.Millisecond, "time an order takes between reading and writing the stock")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up a run after this long")
	fs.BoolVar(&cfg.progress, "progress", true, "show a progress bar on stderr")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rlock demo [flags]\n\n"+
			"A flash sale: one item with limited stock, services x workers placing\n"+
			"orders at once. Each order reads the stock, works, and writes it back.\n"+
			"Without a lock, concurrent orders overwrite each other and the item is\n"+
			"oversold; with rlock's reentrant lock, none is. Exits 1 if a locked run\n"+
			"oversold.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	switch {
	case cfg.services < 1 || cfg.services > 64:
		return fmt.Errorf("%w: --services must be 1..64", errUsage)
	case cfg.workers < 1 || cfg.workers > 256:
		return fmt.Errorf("%w: --workers must be 1..256", errUsage)
	case cfg.stock < 1 || cfg.stock > 1_000_000:
		return fmt.Errorf("%w: --stock must be 1..1000000", errUsage)
	case cfg.maxQty < 1:
		return fmt.Errorf("%w: --max-qty must be at least 1", errUsage)
	case cfg.work < 0 || cfg.timeout <= 0:
		return fmt.Errorf("%w: --work must not be negative and --timeout must be positive", errUsage)
	}

	opts := &redis.Options{}
	where := "embedded miniredis"
	if cfg.redisURL != "" {
		var err error
		if opts, err = redis.ParseURL(cfg.redisURL); err != nil {
			return fmt.Errorf("%w: --redis: %v", errUsage, err)
		}
		where = "Redis at " + opts.Addr
	} else {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return fmt.Errorf("starting the embedded Redis: %w", err)
		}
		defer m.Close()
		m.ClockTTL(true) // TTLs follow the real clock, as on a server
		opts.Addr = m.Addr()
	}
	probe := redis.NewClient(opts)
	defer probe.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := probe.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", where, err)
	}

	fmt.Fprintf(stdout, "Flash sale on %s: stock %d, %d services x %d workers, orders of 1-%d units, %v of work per order.\n\n",
		where, cfg.stock, cfg.services, cfg.workers, cfg.maxQty, cfg.work)
	fmt.Fprintf(stdout, "%-10s %8s %8s %10s %10s %12s %12s\n", "lock", "orders", "sold", "stock left", "oversold", "orders/s", "p99 wait")
	var bad []string
	for _, kind := range []string{"none", "reentrant"} {
		r, err := flashSale(ctx, opts, cfg, kind, stderr)
		if err != nil {
			return fmt.Errorf("run %q: %w", kind, err)
		}
		p99 := "-"
		if kind != "none" {
			p99 = r.p99.Round(10 * time.Microsecond).String()
		}
		fmt.Fprintf(stdout, "%-10s %8d %8d %10d %10d %12.0f %12s\n", kind, r.orders, r.sold, r.left, r.oversold,
			float64(r.orders)/r.elapsed.Seconds(), p99)
		if kind != "none" && r.oversold > 0 {
			bad = append(bad, kind)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("locked runs oversold: %s", strings.Join(bad, ", "))
	}
	fmt.Fprintln(stdout, "\nWith a lock, nothing was oversold.")
	return nil
}

type saleResult struct {
	orders, sold, left, oversold int
	elapsed                      time.Duration
	p99                          time.Duration // wait for the lock per order
}

// flashSale runs one sale. Its keys are unique to the run and deleted after
// it, so a shared Redis keeps nothing of the demo.
func flashSale(ctx context.Context, opts *redis.Options, cfg demoConfig, kind string, stderr io.Writer) (saleResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	run := "rlock-demo:" + uuid.NewString()
	stockKey, lockName := run+":stock", run+":lock"

	type service struct {
		rdb *redis.Client
		rl  *reentrant.Client
	}
	services := make([]service, cfg.services)
	for i := range services {
		rdb := redis.NewClient(opts)
		rl, err := reentrant.NewClient(rdb)
		if err != nil {
			_ = rdb.Close()
			return saleResult{}, err
		}
		services[i] = service{rdb, rl}
	}
	defer func() {
		_ = services[0].rdb.Del(context.WithoutCancel(ctx), stockKey, lockName).Err()
		for _, s := range services {
			_ = s.rl.Close()
			_ = s.rdb.Close()
		}
	}()
	if err := services[0].rdb.Set(ctx, stockKey, cfg.stock, 0).Err(); err != nil {
		return saleResult{}, err
	}

	var orders, sold atomic.Int64
	var mu sync.Mutex
	var waits []time.Duration
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	var soldOut atomic.Bool

	stopBar := progressBar(cfg, kind, stderr, func() float64 { return float64(sold.Load()) / float64(cfg.stock) })
	start := time.Now()
	var wg sync.WaitGroup
	for s := range services {
		for range cfg.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				svc := services[s]
				var lock *reentrant.Lock
				if kind == "reentrant" {
					var err error
					if lock, err = reentrant.New(svc.rl, lockName); err != nil {
						fail(err)
						return
					}
				}
				var local []time.Duration
				defer func() { mu.Lock(); waits = append(waits, local...); mu.Unlock() }()
				for !soldOut.Load() && ctx.Err() == nil {
					qty := 1 + rand.IntN(cfg.maxQty)
					if lock != nil {
						t0 := time.Now()
						if err := lock.Lock(ctx); err != nil {
							if ctx.Err() == nil {
								fail(err)
							}
							return
						}
						local = append(local, time.Since(t0))
					}
					ok, out, err := order(ctx, svc.rdb, stockKey, qty, cfg.work)
					if lock != nil {
						if uerr := lock.Unlock(ctx); uerr != nil && err == nil {
							err = uerr
						}
					}
					if err != nil {
						if ctx.Err() == nil {
							fail(err)
						}
						return
					}
					if ok {
						orders.Add(1)
						sold.Add(int64(qty))
					}
					if out {
						soldOut.Store(true)
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopBar()
	if firstErr != nil {
		return saleResult{}, firstErr
	}
	if ctx.Err() != nil {
		return saleResult{}, fmt.Errorf("did not sell out within %v", cfg.timeout)
	}
	left, err := services[0].rdb.Get(context.WithoutCancel(ctx), stockKey).Int()
	if err != nil {
		return saleResult{}, err
	}
	r := saleResult{orders: int(orders.Load()), sold: int(sold.Load()), left: left, elapsed: elapsed}
	r.oversold = max(0, r.sold-cfg.stock)
	if len(waits) > 0 {
		slices.Sort(waits)
		r.p99 = waits[(len(waits)*99)/100]
	}
	return r, nil
}

// order reads the stock, takes its time (the business logic), and writes
// the stock back: a read-modify-write that only a lock keeps correct. It
// reports whether the order was accepted and whether the item sold out.
func order(ctx context.Context, rdb *redis.Client, key string, qty int, work time.Duration) (ok, soldOut bool, err error) {
	stock, err := rdb.Get(ctx, key).Int()
	if err != nil {
		return false, false, err
	}
	if stock <= 0 {
		return false, true, nil
	}
	if stock < qty {
		return false, false, nil
	}
	time.Sleep(work) // simulated work, e.g. payment authorisation
	if err := rdb.Set(ctx, key, stock-qty, 0).Err(); err != nil {
		return false, false, err
	}
	return true, stock-qty == 0, nil
}

// progressBar draws a bar on w until the returned stop function is called.
func progressBar(cfg demoConfig, label string, w io.Writer, done func() float64) (stop func()) {
	if !cfg.progress {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	draw := func() {
		f := min(done(), 1)
		n := int(f * 30)
		fmt.Fprintf(w, "\r  %-10s [%s%s] %3.0f%%", label, strings.Repeat("#", n), strings.Repeat(" ", 30-n), f*100)
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				draw()
				fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", 50))
				return
			case <-t.C:
				draw()
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}
