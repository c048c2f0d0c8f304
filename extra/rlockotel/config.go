package rlockotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// config is what the options set.
type config struct {
	mp       metric.MeterProvider
	attrs    []attribute.KeyValue
	lockName bool
}

// Option configures NewTrace.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithMeterProvider sets the meter provider the instruments are created
// with. Default: the global one, otel.GetMeterProvider(). A nil provider
// keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return option(func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	})
}

// WithAttributes adds attributes to every measurement (for instance the
// service's or the Redis deployment's name).
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return option(func(c *config) { c.attrs = append(c.attrs, attrs...) })
}

// WithLockName adds the lock's name to the measurements of lock events as
// the attribute rlock.lock.name. Off by default: every lock name becomes
// a time series of each instrument, so turn it on only when an
// application has a small, fixed set of lock names.
func WithLockName() Option {
	return option(func(c *config) { c.lockName = true })
}

func newConfig(opts []Option) config {
	c := config{mp: otel.GetMeterProvider()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}
