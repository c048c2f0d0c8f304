// Package rlockotel reports the locks of an rlock client as OpenTelemetry
// metrics. It is a module of its own, so that rlock's own module does not
// depend on OpenTelemetry.
//
//	trace, err := rlockotel.NewTrace(rlockotel.WithMeterProvider(mp))
//	if err != nil { ... }
//	client, err := rlock.NewClient(rdb, rlock.WithTrace(trace))
//
// The instruments (durations in seconds):
//
//   - rlock.lock.wait.duration (histogram): how long each Lock and TryLock
//     call took, from call to return; attributes rlock.lock.kind and
//     rlock.acquire.outcome ("acquired", "not_obtained", "canceled",
//     "error").
//   - rlock.lock.acquisitions (counter): Lock and TryLock calls, with the
//     same attributes.
//   - rlock.lock.handoffs (counter): grants to a waiting Lock call on the
//     attempt a release's wake-up started; rlock.lock.kind.
//   - rlock.lock.hold.duration (histogram): holding periods, from the grant
//     to the last release or the loss; rlock.lock.kind and rlock.hold.end
//     ("released" or "lost").
//   - rlock.lock.losses (counter): holding periods ended by loss;
//     rlock.lock.kind and rlock.loss.cause (see rlock.LossInfo.Cause).
//   - rlock.lock.waiters (up-down counter): Lock calls waiting for a
//     release; rlock.lock.kind.
//   - rlock.watchdog.renewals (counter): lock renewals by the watchdog;
//     rlock.renewal.result ("renewed", "not_held", "failed").
//   - rlock.watchdog.round.duration (histogram): the latency of each
//     renewal round on one Redis node; rlock.watchdog.status ("ok" or
//     "error").
//   - rlock.watchdog.round.locks (histogram): how many locks each renewal
//     round carried (its batch size).
//
// The lock's name is an attribute (rlock.lock.name) only with WithLockName.
// The attributes of WithAttributes are added to every measurement.
package rlockotel

import (
	"context"
	"errors"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rlock-go/rlock"
)

// ScopeName is the instrumentation scope of the meter: this package's
// import path.
const ScopeName = "github.com/rlock-go/rlock/extra/rlockotel"

// Attribute keys.
const (
	KindKey    = attribute.Key("rlock.lock.kind")
	NameKey    = attribute.Key("rlock.lock.name")
	OutcomeKey = attribute.Key("rlock.acquire.outcome")
	EndKey     = attribute.Key("rlock.hold.end")
	CauseKey   = attribute.Key("rlock.loss.cause")
	ResultKey  = attribute.Key("rlock.renewal.result")
	StatusKey  = attribute.Key("rlock.watchdog.status")
)

// Bucket boundaries (seconds): lock waits and holds span milliseconds to
// minutes; a renewal round is a round trip.
var (
	lockBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	roundBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// NewTrace returns an rlock.Trace that records the metrics listed in the
// package doc; pass it to rlock.NewClient with rlock.WithTrace. It
// returns an error if an instrument cannot be created (the meter
// provider's error).
func NewTrace(opts ...Option) (*rlock.Trace, error) {
	c := newConfig(opts)
	m, err := newMetrics(c)
	if err != nil {
		return nil, err
	}
	return &rlock.Trace{
		AcquireDone: m.acquireDone,
		Released:    m.released,
		Lost:        m.lost,
		Renewed:     m.renewed,
		Waiting:     m.waiting,
	}, nil
}

// metrics are the instruments of one Trace.
type metrics struct {
	wait       metric.Float64Histogram
	acquires   metric.Int64Counter
	handoffs   metric.Int64Counter
	hold       metric.Float64Histogram
	losses     metric.Int64Counter
	waiters    metric.Int64UpDownCounter
	renewals   metric.Int64Counter
	round      metric.Float64Histogram
	roundLocks metric.Int64Histogram

	attrs attrCache
}

func newMetrics(c config) (*metrics, error) {
	meter := c.mp.Meter(ScopeName)
	m := &metrics{attrs: attrCache{base: c.attrs, lockName: c.lockName, sets: map[attrKey]metric.MeasurementOption{}}}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.wait, err = meter.Float64Histogram("rlock.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long Lock and TryLock calls took, from call to return."),
		metric.WithExplicitBucketBoundaries(lockBuckets...))
	add(err)
	m.acquires, err = meter.Int64Counter("rlock.lock.acquisitions", metric.WithUnit("{call}"),
		metric.WithDescription("Lock and TryLock calls, by outcome."))
	add(err)
	m.handoffs, err = meter.Int64Counter("rlock.lock.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Grants to a waiting Lock call on the attempt a release's wake-up started."))
	add(err)
	m.hold, err = meter.Float64Histogram("rlock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Holding periods, from the grant to the last release or the loss."),
		metric.WithExplicitBucketBoundaries(lockBuckets...))
	add(err)
	m.losses, err = meter.Int64Counter("rlock.lock.losses", metric.WithUnit("{loss}"),
		metric.WithDescription("Holding periods ended by the loss of the lock, by cause."))
	add(err)
	m.waiters, err = meter.Int64UpDownCounter("rlock.lock.waiters", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls waiting for a release."))
	add(err)
	m.renewals, err = meter.Int64Counter("rlock.watchdog.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Lock renewals by the watchdog, by result."))
	add(err)
	m.round, err = meter.Float64Histogram("rlock.watchdog.round.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of each watchdog renewal round on one Redis node."),
		metric.WithExplicitBucketBoundaries(roundBuckets...))
	add(err)
	m.roundLocks, err = meter.Int64Histogram("rlock.watchdog.round.locks", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks carried by each watchdog renewal round."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) acquireDone(i rlock.AcquireInfo) {
	ctx := context.Background()
	o := m.attrs.get(attrKey{kind: i.Kind, key: OutcomeKey, value: i.Outcome.String(), name: i.Name})
	m.wait.Record(ctx, i.Wait.Seconds(), o)
	m.acquires.Add(ctx, 1, o)
	if i.Handoff {
		m.handoffs.Add(ctx, 1, m.attrs.get(attrKey{kind: i.Kind, name: i.Name}))
	}
}

func (m *metrics) released(i rlock.ReleaseInfo) {
	m.hold.Record(context.Background(), i.Held.Seconds(),
		m.attrs.get(attrKey{kind: i.Kind, key: EndKey, value: "released", name: i.Name}))
}

func (m *metrics) lost(i rlock.LossInfo) {
	ctx := context.Background()
	m.hold.Record(ctx, i.Held.Seconds(), m.attrs.get(attrKey{kind: i.Kind, key: EndKey, value: "lost", name: i.Name}))
	m.losses.Add(ctx, 1, m.attrs.get(attrKey{kind: i.Kind, key: CauseKey, value: i.Cause, name: i.Name}))
}

func (m *metrics) waiting(i rlock.WaitInfo) {
	m.waiters.Add(context.Background(), int64(i.Delta), m.attrs.get(attrKey{kind: i.Kind, name: i.Name}))
}

func (m *metrics) renewed(i rlock.RenewInfo) {
	ctx := context.Background()
	for _, r := range []struct {
		n      int
		result string
	}{{i.Renewed, "renewed"}, {i.NotHeld, "not_held"}, {i.Failed, "failed"}} {
		if r.n > 0 {
			m.renewals.Add(ctx, int64(r.n), m.attrs.get(attrKey{key: ResultKey, value: r.result}))
		}
	}
	status := "ok"
	if i.Err != nil {
		status = "error"
	}
	m.round.Record(ctx, i.Latency.Seconds(), m.attrs.get(attrKey{key: StatusKey, value: status}))
	m.roundLocks.Record(ctx, int64(i.Locks), m.attrs.get(attrKey{}))
}

// attrKey names one attribute set: the lock kind (if any), one more
// attribute (if key is set) and the lock name (kept only with
// WithLockName).
type attrKey struct {
	kind  string
	key   attribute.Key
	value string
	name  string
}

// attrCache builds each attribute set once: measurements reuse it.
type attrCache struct {
	base     []attribute.KeyValue
	lockName bool

	mu   sync.RWMutex
	sets map[attrKey]metric.MeasurementOption
}

func (c *attrCache) get(k attrKey) metric.MeasurementOption {
	if !c.lockName {
		k.name = ""
	}
	c.mu.RLock()
	o, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	kvs := slices.Clone(c.base)
	if k.kind != "" {
		kvs = append(kvs, KindKey.String(k.kind))
	}
	if k.key != "" {
		kvs = append(kvs, k.key.String(k.value))
	}
	if k.name != "" {
		kvs = append(kvs, NameKey.String(k.name))
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	c.mu.Lock()
	c.sets[k] = o
	c.mu.Unlock()
	return o
}
