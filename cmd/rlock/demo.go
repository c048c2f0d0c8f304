package main

import (
	"context"
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

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

// lockKind is one run of the demo: the same load, guarded by one kind of
// lock. To add a kind, append it to lockKinds.
type lockKind struct {
	name string
	// redlock marks a kind whose lock spans the RedLock nodes (--redlock, or
	// embedded ones): the run's services then have a client per node in
	// service.redlock.
	redlock bool
	// newLocker returns the lock one worker of svc takes around each order;
	// nil newLocker means no lock. name is the run's lock name, unique to
	// the run; a kind that needs several locks derives their names from it
	// (e.g. name+":1"), and every key containing name is deleted after the
	// run. Each worker gets its own handle, so workers are distinct owners.
	newLocker func(svc *service, name string) (rlock.Locker, error)
}

// lockKinds are the demo's runs, in order.
var lockKinds = []lockKind{
	{name: "none"},
	{name: "reentrant", newLocker: func(svc *service, name string) (rlock.Locker, error) {
		return reentrant.New(svc.rl, name)
	}},
	{name: "fair", newLocker: func(svc *service, name string) (rlock.Locker, error) {
		return fair.New(svc.rl, name)
	}},
	{name: "multilock", newLocker: func(svc *service, name string) (rlock.Locker, error) {
		// The order and the item's stock record, locked together.
		var members []rlock.Locker
		for _, part := range []string{":order", ":stock", ":audit"} {
			l, err := reentrant.New(svc.rl, name+part)
			if err != nil {
				return nil, err
			}
			members = append(members, l)
		}
		return multilock.New(members)
	}},
	{name: "redlock", redlock: true, newLocker: func(svc *service, name string) (rlock.Locker, error) {
		return redlock.New(svc.redlock, name)
	}},
}

// service is one simulated service: its own Redis connection pool and rlock
// client, as separate processes would have.
type service struct {
	rdb redis.UniversalClient
	rl  *rlock.Client
	// redlock has one rlock client per RedLock node, for kinds with redlock
	// set; nil otherwise.
	redlock []*rlock.Client
	conns   []redis.UniversalClient // every go-redis client, rdb first
}

// closeLocks closes the service's rlock clients, stopping their renewals.
func (s *service) closeLocks() {
	if s.rl != nil {
		_ = s.rl.Close()
	}
	for _, c := range s.redlock {
		_ = c.Close()
	}
}

// closeConns closes the service's go-redis clients.
func (s *service) closeConns() {
	for _, c := range s.conns {
		_ = c.Close()
	}
}

type demoConfig struct {
	services int
	workers  int
	stock    int
	maxQty   int
	work     time.Duration
	timeout  time.Duration
	progress progressMode
}

const demoHelp = `Usage: rlock demo [flags]

A flash sale: one item with limited stock, services x workers placing orders
of random sizes at once. Each order reads the stock, works, and writes it
back. Without a lock, concurrent orders overwrite each other and the item is
oversold; with each rlock lock kind, none is. Every run prints the orders
accepted, units sold, stock left, units oversold, orders per second and the
99th percentile of the wait for the lock.

Then a read-heavy run, a price cache: every worker reads a price kept in
two fields, one writer updates both fields one after the other. Without a
lock some reads see a half-written price; with the read-write lock (read
lock to read, write lock to write) none does (--price-cache=0 skips it).

Then a partner API that allows --partner-limit (5) concurrent calls: every
service counts down a count-down latch and waits on it (the start line),
then every worker makes --partner-api calls. Without a limit the peak of
calls in flight is every worker; through one semaphore of 5 permits it
never passes 5 (--partner-api=0 skips it).

Runs on an embedded Redis (miniredis; TTLs follow the real clock) unless
--redis or --cluster is given. Its keys start with "rlock-demo:" and are
deleted after each run.

Exit status: 0 ok, 1 a locked run oversold, saw a torn price, went over the
partner's limit or failed,
2 bad usage, 3 Redis unreachable, 4 Redis refused the connection (password,
database).

Flags:
`

func demo(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("rlock demo", demoHelp, e)
	var (
		cfg     demoConfig
		conn    connFlags
		locks   string
		redlock string
		cache   int
		partner int
		limit   int
	)
	names := make([]string, len(lockKinds))
	for i, k := range lockKinds {
		names[i] = k.name
	}
	conn.register(fs, "an embedded miniredis")
	fs.StringVar(&redlock, "redlock", "", "RedLock nodes, host:port,host:port,... (independent masters; default: embedded ones)")
	fs.StringVar(&locks, "locks", "all", "runs to make, comma-separated, of: "+strings.Join(names, ", "))
	fs.IntVar(&cfg.services, "services", 4, "simulated services, each with its own Redis and rlock client")
	fs.IntVar(&cfg.workers, "workers", 8, "workers per service ordering concurrently")
	fs.IntVar(&cfg.stock, "stock", 100, "units of stock at the start of each run")
	fs.IntVar(&cfg.maxQty, "max-qty", 3, "largest order; each order is 1..max-qty units")
	fs.DurationVar(&cfg.work, "work", 2*time.Millisecond, "time an order takes between reading and writing the stock")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up a run after this long")
	fs.IntVar(&cache, "price-cache", 20, "updates in the read-heavy price-cache run (a read-write lock: every worker reads, one writer updates); 0 skips it")
	fs.IntVar(&partner, "partner-api", 4, "calls per worker in the partner-API run (a semaphore limits the calls in flight; a count-down latch is the services' start line); 0 skips it")
	fs.IntVar(&limit, "partner-limit", 5, "concurrent calls the partner API allows: the semaphore's permits")
	cfg.progress = progressAuto
	fs.Var(&cfg.progress, "progress", "--progress=MODE: progress on stderr, MODE one of auto (a bar on a terminal, a line per run otherwise), bar, plain, off; --progress alone means bar (default auto)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		if _, err := parseProgress(pos[0]); err == nil {
			return usageError("unexpected argument %q: write --progress=%s (--progress alone means bar)", pos[0], pos[0])
		}
		return usageError("unexpected argument %q", pos[0])
	}
	switch {
	case cfg.services < 1 || cfg.services > 64:
		return usageError("--services must be 1..64")
	case cfg.workers < 1 || cfg.workers > 256:
		return usageError("--workers must be 1..256")
	case cfg.stock < 1 || cfg.stock > 1_000_000:
		return usageError("--stock must be 1..1000000")
	case cfg.maxQty < 1:
		return usageError("--max-qty must be at least 1")
	case cfg.work < 0 || cfg.timeout <= 0:
		return usageError("--work must not be negative and --timeout must be positive")
	case cache < 0 || cache > 100_000:
		return usageError("--price-cache must be 0..100000")
	case partner < 0 || partner > 100_000:
		return usageError("--partner-api must be 0..100000")
	case limit < 1 || limit > 10_000:
		return usageError("--partner-limit must be 1..10000")
	}
	kinds, err := selectKinds(locks)
	if err != nil {
		return err
	}
	var redlockAddrs []string
	if redlock != "" {
		if redlockAddrs, err = parseAddrs("--redlock", redlock); err != nil {
			return err
		}
	}
	if cfg.progress == progressAuto {
		cfg.progress = progressPlain
		if e.stderrTTY {
			cfg.progress = progressBar
		}
	}

	tgt, err := conn.resolve("")
	if err != nil {
		return err
	}
	embedded := tgt == nil
	if embedded {
		m, err := startMini()
		if err != nil {
			return err
		}
		defer m.Close()
		tgt = miniTarget(m)
	}
	if err := pingTarget(ctx, tgt); err != nil {
		return err
	}
	tgt.warn(e, "demo")

	// RedLock nodes: only when a selected kind needs them.
	var nodes []*target
	needNodes := slices.ContainsFunc(kinds, func(k lockKind) bool { return k.redlock })
	if needNodes && !embedded && len(redlockAddrs) == 0 && strings.TrimSpace(locks) == "all" {
		// A real server but no RedLock nodes: run the rest.
		fmt.Fprintln(e.stderr, "rlock demo: skipping the redlock run: add --redlock host:port,... (independent servers) to include it")
		kinds = slices.DeleteFunc(kinds, func(k lockKind) bool { return k.redlock })
		needNodes = false
	}
	if !needNodes && len(redlockAddrs) > 0 {
		fmt.Fprintln(e.stderr, "rlock demo: --redlock ignored: no selected run uses RedLock nodes")
	}
	if needNodes {
		switch {
		case len(redlockAddrs) > 0:
			for _, a := range redlockAddrs {
				nodes = append(nodes, conn.node("RedLock node "+a, a))
			}
		case embedded:
			for range 3 {
				m, err := startMini()
				if err != nil {
					return err
				}
				defer m.Close()
				nodes = append(nodes, miniTarget(m))
			}
		default:
			return usageError("the redlock run needs --redlock host:port,... with a real Redis")
		}
		for _, n := range nodes {
			if err := pingTarget(ctx, n); err != nil {
				return err
			}
			n.warn(e, "demo")
		}
	}

	where := tgt.where
	if embedded {
		where = "an embedded miniredis"
	}
	fmt.Fprintf(e.stdout, "Flash sale on %s: stock %d, %d services x %d workers, orders of 1-%d units, %v of work per order.\n\n",
		where, cfg.stock, cfg.services, cfg.workers, cfg.maxQty, cfg.work)
	fmt.Fprintf(e.stdout, "%-10s %8s %8s %10s %10s %12s %12s\n", "lock", "orders", "sold", "stock left", "oversold", "orders/s", "p99 wait")
	var bad []string
	for _, kind := range kinds {
		r, err := flashSale(ctx, tgt, nodes, cfg, kind, e.stderr)
		if err != nil {
			return fmt.Errorf("run %q: %w", kind.name, err)
		}
		p99 := "-"
		if kind.newLocker != nil {
			p99 = r.p99.Round(10 * time.Microsecond).String()
		}
		fmt.Fprintf(e.stdout, "%-10s %8d %8d %10d %10d %12.0f %12s\n", kind.name, r.orders, r.sold, r.left, r.oversold,
			float64(r.orders)/r.elapsed.Seconds(), p99)
		if kind.newLocker != nil && r.oversold > 0 {
			bad = append(bad, kind.name)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("locked runs oversold: %s", strings.Join(bad, ", "))
	}
	if slices.ContainsFunc(kinds, func(k lockKind) bool { return k.newLocker != nil }) {
		fmt.Fprintln(e.stdout, "\nWith a lock, nothing was oversold.")
	}
	if cache > 0 {
		if err := runPriceCache(ctx, tgt, cfg, cache, e); err != nil {
			return err
		}
	}
	if partner > 0 {
		return runPartnerAPI(ctx, tgt, cfg, partner, limit, e)
	}
	return nil
}

// selectKinds returns the kinds named in list ("all" for every kind), in
// lockKinds order.
func selectKinds(list string) ([]lockKind, error) {
	if strings.TrimSpace(list) == "all" {
		return lockKinds, nil
	}
	want := map[string]bool{}
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.ContainsFunc(lockKinds, func(k lockKind) bool { return k.name == n }) {
			names := make([]string, len(lockKinds))
			for i, k := range lockKinds {
				names[i] = k.name
			}
			return nil, usageError("--locks: unknown lock kind %q (have: %s)", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	if len(want) == 0 {
		return nil, usageError("--locks: no lock kinds given")
	}
	var out []lockKind
	for _, k := range lockKinds {
		if want[k.name] {
			out = append(out, k)
		}
	}
	return out, nil
}

func startMini() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("starting the embedded Redis: %w", err)
	}
	m.ClockTTL(true) // TTLs follow the real clock, as on a server
	return m, nil
}

func miniTarget(m *miniredis.Miniredis) *target {
	addr := m.Addr()
	return &target{where: "embedded Redis at " + addr, newClient: func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr})
	}}
}

func pingTarget(ctx context.Context, t *target) error {
	rdb := t.newClient()
	defer rdb.Close()
	return t.ping(ctx, rdb)
}

type saleResult struct {
	orders, sold, left, oversold int
	elapsed                      time.Duration
	p99                          time.Duration // wait for the lock per order
}

// newService opens one simulated service's clients.
func newService(tgt *target, nodes []*target) (*service, error) {
	s := &service{rdb: tgt.newClient()}
	s.conns = append(s.conns, s.rdb)
	var err error
	if s.rl, err = rlock.NewClient(s.rdb); err != nil {
		s.closeConns()
		return nil, err
	}
	for _, n := range nodes {
		rdb := n.newClient()
		s.conns = append(s.conns, rdb)
		c, err := rlock.NewClient(rdb)
		if err != nil {
			s.closeLocks()
			s.closeConns()
			return nil, err
		}
		s.redlock = append(s.redlock, c)
	}
	return s, nil
}

// flashSale runs one sale. Its keys all contain a name unique to the run
// and are deleted after it, so a shared Redis keeps nothing of the demo.
func flashSale(ctx context.Context, tgt *target, nodes []*target, cfg demoConfig, kind lockKind, stderr io.Writer) (saleResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	run := "rlock-demo:" + uuid.NewString()
	stockKey, lockName := run+":stock", run+":lock"
	if !kind.redlock {
		nodes = nil
	}

	services := make([]*service, 0, cfg.services)
	defer func() {
		// rlock clients first, so no renewal recreates a key; then the
		// run's keys everywhere.
		for _, s := range services {
			s.closeLocks()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, t := range append([]*target{tgt}, nodes...) {
			rdb := t.newClient()
			if err := deleteRunKeys(cctx, rdb, run); err != nil {
				fmt.Fprintf(stderr, "rlock demo: could not delete the keys *%s* on %s: %v\n", run, t.where, err)
			}
			_ = rdb.Close()
		}
		for _, s := range services {
			s.closeConns()
		}
	}()
	for range cfg.services {
		s, err := newService(tgt, nodes)
		if err != nil {
			return saleResult{}, err
		}
		services = append(services, s)
	}
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

	stopBar := showProgress(cfg.progress, kind.name, stderr, func() float64 { return float64(sold.Load()) / float64(cfg.stock) })
	start := time.Now()
	var wg sync.WaitGroup
	for _, svc := range services {
		for range cfg.workers {
			wg.Go(func() {
				var lock rlock.Locker
				if kind.newLocker != nil {
					var err error
					if lock, err = kind.newLocker(svc, lockName); err != nil {
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
			})
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

// deleteRunKeys deletes every key whose name contains run (the stock, the
// locks, and the keys derived from them: queues, tokens, replay latches),
// on every master of a Cluster. Keys are deleted one by one, as they live in
// different hash slots.
func deleteRunKeys(ctx context.Context, rdb redis.UniversalClient, run string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*"+run+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Ring:
		return c.ForEachShard(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	}
	return fmt.Errorf("cannot clean up keys through a %T", rdb)
}

// order reads the stock, takes its time (the business logic), and writes
// the stock back: a read-modify-write that only a lock keeps correct. It
// reports whether the order was accepted and whether the item sold out.
func order(ctx context.Context, rdb redis.Cmdable, key string, qty int, work time.Duration) (ok, soldOut bool, err error) {
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

// progressMode is the --progress flag.
type progressMode string

const (
	progressAuto  progressMode = "auto"
	progressBar   progressMode = "bar"
	progressPlain progressMode = "plain"
	progressOff   progressMode = "off"
)

func (p *progressMode) String() string {
	if p == nil || *p == "" {
		return string(progressAuto)
	}
	return string(*p)
}

func (p *progressMode) Set(s string) error {
	m, err := parseProgress(s)
	if err != nil {
		return err
	}
	*p = m
	return nil
}

// parseProgress parses a --progress value: a mode, or true/false (what the
// flag package passes for a bare --progress) for bar/off.
func parseProgress(s string) (progressMode, error) {
	switch strings.ToLower(s) {
	case "auto":
		return progressAuto, nil
	case "bar", "true", "1":
		return progressBar, nil
	case "plain":
		return progressPlain, nil
	case "off", "false", "0":
		return progressOff, nil
	}
	return "", fmt.Errorf("want auto, bar, plain or off")
}

// IsBoolFlag lets "--progress" alone mean "--progress=true" (a bar). A
// mode must then be joined with "=": "--progress plain" leaves "plain" as
// an argument, which demo reports with the right spelling.
func (p *progressMode) IsBoolFlag() bool { return true }

// showProgress reports a run's progress on w until the returned stop
// function is called: a redrawn bar, or a line at the start and one at the
// end.
func showProgress(mode progressMode, label string, w io.Writer, done func() float64) (stop func()) {
	switch mode {
	case progressBar, progressAuto: // auto is resolved before; treat as a bar
	case progressPlain:
		start := time.Now()
		fmt.Fprintf(w, "rlock demo: run %s started\n", label)
		return func() {
			fmt.Fprintf(w, "rlock demo: run %s done: %.0f%% sold in %v\n", label, min(done(), 1)*100,
				time.Since(start).Round(time.Millisecond))
		}
	default:
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	draw := func() {
		f := min(done(), 1)
		n := int(f * 30)
		fmt.Fprintf(w, "\r  %-10s [%s%s] %3.0f%%", label, strings.Repeat("#", n), strings.Repeat(" ", 30-n), f*100)
	}
	wg.Go(func() {
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
	})
	return func() { close(quit); wg.Wait() }
}
