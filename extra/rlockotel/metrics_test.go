package rlockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/extra/rlockotel"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// collect reads every metric the reader has, by name.
func collect(t require.TestingT, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, rlockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// point is one data point: its attributes, and its value (a sum) or its
// count (a histogram).
type point struct {
	attrs map[string]string
	value int64
}

func points(t require.TestingT, m metricdata.Metrics) []point {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	attrs := func(s attribute.Set) map[string]string {
		out := map[string]string{}
		for _, kv := range s.ToSlice() {
			out[string(kv.Key)] = kv.Value.String()
		}
		return out
	}
	var out []point
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs(p.Attributes), p.Value})
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs(p.Attributes), int64(p.Count)})
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs(p.Attributes), int64(p.Count)})
		}
	default:
		require.Failf(t, "unexpected data", "%s: %T", m.Name, m.Data)
	}
	return out
}

// value returns the value (or count) of m's point whose attributes are
// exactly want, and 0 if it has none.
func value(t require.TestingT, ms map[string]metricdata.Metrics, name string, want map[string]string) int64 {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	m, ok := ms[name]
	if !ok {
		return 0
	}
	for _, p := range points(t, m) {
		if maps(p.attrs, want) {
			return p.value
		}
	}
	return 0
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMetrics: a lock taken, a waiter handed it by the release, a TryLock
// refused, and a loss (force-unlocked, found by the watchdog) are recorded
// by every instrument with their attributes, and no lock name by default.
func TestMetrics(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(ctx)
		trace, err := rlockotel.NewTrace(rlockotel.WithMeterProvider(mp), rlockotel.WithAttributes(attribute.String("service", "test")))
		require.NoError(t, err)
		c, err := rlock.NewClient(be.NewClient(t), rlock.WithTrace(trace), rlock.WithWatchdogLease(600*time.Millisecond))
		require.NoError(t, err)
		defer c.Close()
		a, err := reentrant.New(c, "otel")
		require.NoError(t, err)
		b, err := reentrant.New(c, "otel")
		require.NoError(t, err)

		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		kind := map[string]string{"service": "test", "rlock.lock.kind": "reentrant"}
		with := func(k, v string) map[string]string {
			m := map[string]string{k: v}
			for k, v := range kind {
				m[k] = v
			}
			return m
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.EqualValues(c, 1, value(c, collect(c, reader), "rlock.lock.waiters", kind))
		},
			5*time.Second, time.Millisecond, "b waits")
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-got)
		require.ErrorIs(t, a.TryLock(ctx), rlock.ErrNotObtained)
		_, err = a.ForceUnlock(ctx)
		require.NoError(t, err)
		<-b.Done()

		ms := collect(t, reader)
		require.EqualValues(t, 2, value(t, ms, "rlock.lock.acquisitions", with("rlock.acquire.outcome", "acquired")))
		require.EqualValues(t, 1, value(t, ms, "rlock.lock.acquisitions", with("rlock.acquire.outcome", "not_obtained")))
		require.EqualValues(t, 2, value(t, ms, "rlock.lock.wait.duration", with("rlock.acquire.outcome", "acquired")))
		require.EqualValues(t, 1, value(t, ms, "rlock.lock.handoffs", kind))
		require.EqualValues(t, 0, value(t, ms, "rlock.lock.waiters", kind))
		require.EqualValues(t, 1, value(t, ms, "rlock.lock.hold.duration", with("rlock.hold.end", "released")))
		require.EqualValues(t, 1, value(t, ms, "rlock.lock.hold.duration", with("rlock.hold.end", "lost")))
		require.EqualValues(t, 1, value(t, ms, "rlock.lock.losses", with("rlock.loss.cause", "not_held_at_renewal")))
		require.EqualValues(t, 1, value(t, ms, "rlock.watchdog.renewals", map[string]string{"service": "test", "rlock.renewal.result": "not_held"}))
		require.Positive(t, value(t, ms, "rlock.watchdog.round.duration", map[string]string{"service": "test", "rlock.watchdog.status": "ok"}))
		require.Positive(t, value(t, ms, "rlock.watchdog.round.locks", map[string]string{"service": "test"}))
		for name, m := range ms {
			require.NotEmpty(t, m.Unit, name)
			for _, p := range points(t, m) {
				require.NotContains(t, p.attrs, "rlock.lock.name", name)
			}
		}
	})
}

// TestMetricsWithLockName: the lock's name is an attribute only when
// asked for.
func TestMetricsWithLockName(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	trace, err := rlockotel.NewTrace(rlockotel.WithMeterProvider(mp), rlockotel.WithLockName())
	require.NoError(t, err)
	c, err := rlock.NewClient(redistest.Mini(t).NewClient(t), rlock.WithTrace(trace))
	require.NoError(t, err)
	defer c.Close()
	l, err := reentrant.New(c, "named")
	require.NoError(t, err)
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Unlock(ctx))
	ms := collect(t, reader)
	require.EqualValues(t, 1, value(t, ms, "rlock.lock.acquisitions",
		map[string]string{"rlock.lock.kind": "reentrant", "rlock.lock.name": "named", "rlock.acquire.outcome": "acquired"}))
	require.EqualValues(t, 1, value(t, ms, "rlock.lock.hold.duration",
		map[string]string{"rlock.lock.kind": "reentrant", "rlock.lock.name": "named", "rlock.hold.end": "released"}))
}
