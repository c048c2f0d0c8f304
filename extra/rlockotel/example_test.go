package rlockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/extra/rlockotel"
	"github.com/rlock-go/rlock/reentrant"
)

// The README's snippet: a client whose locks are recorded as metrics.
func ExampleNewTrace() {
	meterProvider := sdkmetric.NewMeterProvider() // with your exporter's reader
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	trace, err := rlockotel.NewTrace(
		rlockotel.WithMeterProvider(meterProvider),
		rlockotel.WithAttributes(attribute.String("service.name", "billing")),
	)
	if err != nil {
		log.Fatal(err)
	}
	client, err := rlock.NewClient(rdb, rlock.WithTrace(trace))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
}

// One lock and unlock, read back through an in-memory metric reader: the
// acquisition is counted with its lock kind and outcome.
func Example() {
	srv, _ := miniredis.Run() // any Redis; an embedded one for the example
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	reader := sdkmetric.NewManualReader() // your exporter's reader in a service
	trace, err := rlockotel.NewTrace(rlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		log.Fatal(err)
	}
	c, err := rlock.NewClient(rdb, rlock.WithTrace(trace))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, _ := reentrant.New(c, "orders:42")
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "rlock.lock.acquisitions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				kind, _ := dp.Attributes.Value(rlockotel.KindKey)
				outcome, _ := dp.Attributes.Value(rlockotel.OutcomeKey)
				fmt.Println(m.Name, kind.AsString(), outcome.AsString(), dp.Value)
			}
		}
	}
	// Output:
	// rlock.lock.acquisitions reentrant acquired 1
}
