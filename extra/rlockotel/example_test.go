package rlockotel_test

import (
	"log"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/extra/rlockotel"
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
