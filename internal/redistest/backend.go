package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Backend names, as used for the subtests of Each.
const (
	// MiniName is the Name of the embedded miniredis backend.
	MiniName = "miniredis"
	// RealName is the Name of the real redis-server backend.
	RealName = "redis"
)

// Backend is one Redis server a behaviour test runs against: an embedded
// miniredis or a real redis-server. Each test gets a fresh one.
type Backend struct {
	// Name is "miniredis", "redis" or "cluster".
	Name string
	// Addr is the host:port the clients dial.
	Addr string
	// NewClient returns a go-redis client for the backend, closed in
	// t.Cleanup. Its options are go-redis defaults with Addr set; opts may
	// change any of them.
	// It is nil for the cluster backend: use Universal there.
	NewClient func(t testing.TB, opts ...func(*redis.Options)) *redis.Client
	// Universal returns a go-redis client for any backend (a
	// *redis.ClusterClient for the cluster), closed in t.Cleanup.
	Universal func(t testing.TB) redis.UniversalClient
	// Cluster is the cluster of the cluster backend, nil otherwise.
	Cluster *Cluster
	// Mini is the server of the miniredis backend, nil otherwise.
	Mini *miniredis.Miniredis
	// Real is the server of the real backend, nil otherwise.
	Real *Server
	// Restart simulates a server restart with data loss, keeping Addr: for
	// real Redis it kills the process and starts a new one on the same port;
	// for miniredis it closes the listener, drops all keys and the script
	// cache, and listens again on the same address. Connections open at the
	// time are broken either way.
	Restart func(t testing.TB)
}

// IsMini reports whether b is the miniredis backend.
func (b *Backend) IsMini() bool { return b.Mini != nil }

// IsReal reports whether b is the real redis-server backend.
func (b *Backend) IsReal() bool { return b.Real != nil }

// ClusterName is the Name of the Redis Cluster backend.
const ClusterName = "cluster"

// EachWithCluster is Each plus a third subtest, "cluster": the test binary's
// shared 3-master, 3-replica Redis Cluster (see SharedCluster; the package's
// TestMain must use StopSharedAfter), reached through a *redis.ClusterClient.
// Use it for behaviour tests that reach Redis only through b.Universal and
// the lock API (the cluster backend has no NewClient, Addr or Restart, and
// other tests share its data: use unique names).
func EachWithCluster(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	Each(t, fn)
	t.Run(ClusterName, func(t *testing.T) {
		c := SharedCluster(t)
		fn(t, &Backend{
			Name:      ClusterName,
			Cluster:   c,
			Universal: func(t testing.TB) redis.UniversalClient { return c.NewClient(t) },
		})
	})
}

// Each runs fn twice, as the subtests "miniredis" and "redis", each with a
// fresh backend of its own. The "redis" subtest is skipped when redis-server
// is not installed.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run(MiniName, func(t *testing.T) {
		fn(t, Mini(t))
	})
	t.Run(RealName, func(t *testing.T) {
		fn(t, Real(t))
	})
}

// Mini starts a miniredis for the test and returns it as a Backend. TTLs
// follow the real clock (miniredis' ClockTTL), so keys expire as on a real
// server without FastForward.
func Mini(t testing.TB) *Backend {
	t.Helper()
	m := miniredis.RunT(t)
	m.ClockTTL(true)
	addr := m.Addr()
	return &Backend{
		Name: MiniName,
		Addr: addr,
		NewClient: func(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
			t.Helper()
			return newClient(t, addr, opts)
		},
		Universal: func(t testing.TB) redis.UniversalClient {
			t.Helper()
			return newClient(t, addr, nil)
		},
		Mini: m,
		Restart: func(t testing.TB) {
			t.Helper()
			restartMini(t, m)
		},
	}
}

// Real starts a redis-server for the test (see StartServer, which skips the
// test when redis-server is missing) and returns it as a Backend.
func Real(t testing.TB) *Backend {
	t.Helper()
	s := StartServer(t)
	return &Backend{
		Name:      RealName,
		Addr:      s.Addr(),
		NewClient: s.NewClient,
		Universal: func(t testing.TB) redis.UniversalClient { return s.NewClient(t) },
		Real:      s,
		Restart: func(t testing.TB) {
			t.Helper()
			s.Kill()
			s.Restart(t)
		},
	}
}

// restartMini makes m look like a restarted server: the listener and every
// connection are closed, keys and cached scripts are gone, and it listens
// again on the same address.
func restartMini(t testing.TB, m *miniredis.Miniredis) {
	t.Helper()
	// Miniredis has no direct way to forget its scripts: ask it while it
	// still listens.
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.ScriptFlush(ctx).Err()
	cancel()
	_ = c.Close()
	if err != nil {
		t.Fatalf("redistest: SCRIPT FLUSH on miniredis before restart: %v", err)
	}

	m.Close()
	m.FlushAll()
	// Close cancels m.Ctx and Restart does not renew it; with a cancelled
	// context every blocking command (BLPOP, XREAD BLOCK, ...) would return
	// without writing any reply, leaving its client hanging. No command runs
	// while the server is closed, so the fields can be swapped here.
	m.Lock()
	m.Ctx, m.CtxCancel = context.WithCancel(context.Background())
	m.Unlock()

	var restartErr error
	backoff := 10 * time.Millisecond
	for range restartAttempts {
		if restartErr = m.Restart(); restartErr == nil {
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 200*time.Millisecond)
	}
	t.Fatalf("redistest: restarting miniredis on %s: %v", m.Addr(), restartErr)
}

// newClient returns a client for addr with opts applied, closed in t.Cleanup.
func newClient(t testing.TB, addr string, opts []func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: addr}
	for _, opt := range opts {
		opt(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Name returns a key (or lock) name that is unique to this call: the test's
// name with anything but letters, digits, '_', '.' and '-' replaced by '_',
// followed by a random suffix.
func Name(t testing.TB) string {
	return fmt.Sprintf("%s-%016x", unsafeNameChars.ReplaceAllString(t.Name(), "_"), rand.Uint64())
}

// NewProxiedClient puts a fault-injection Proxy in front of b and returns
// it with a go-redis client that dials through it; opts apply after the
// address is set.
func (b *Backend) NewProxiedClient(t testing.TB, opts ...func(*redis.Options)) (*Proxy, *redis.Client) {
	t.Helper()
	p := NewProxy(t, b.Addr)
	return p, b.NewClient(t, append([]func(*redis.Options){func(o *redis.Options) { o.Addr = p.Addr() }}, opts...)...)
}
