// Package tracing sets up OpenTelemetry traces from the standard OTEL_*
// environment variables, and holds what the gateway's spans share: the
// W3C trace-context propagator and the attribute names.
//
// Tracing is off unless the environment asks for it (an OTLP endpoint, or
// OTEL_TRACES_EXPORTER=otlp, and not OTEL_SDK_DISABLED=true): a gateway that nobody traces pays for no-op
// spans only.
package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of every oncehook span.
const Name = "github.com/oncehook/oncehook"

// Attribute names, one place for all spans.
const (
	Source      = attribute.Key("oncehook.source")
	Destination = attribute.Key("oncehook.destination")
	Verdict     = attribute.Key("oncehook.verdict") // accepted, duplicate, or the rejection's reason
	Events      = attribute.Key("oncehook.events")  // how many events the request carried
	Key         = attribute.Key("oncehook.key")     // the event's Idempotency-Key
	Attempt     = attribute.Key("oncehook.attempt")
	Outcome     = attribute.Key("oncehook.outcome") // delivered, retry, dead, released
	Effect      = attribute.Key("oncehook.effect")  // an effects-ledger call's business key
)

// Propagator is W3C trace context: what a delivery's traceparent header
// carries, and what the effects API honours.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Enabled reports whether the environment asks for traces.
// OTEL_SDK_DISABLED=true (any case, as the specification reads booleans)
// turns them off whatever else is set: it is how a platform that exports an
// OTLP endpoint to every service turns one off. The Go SDK does not read it.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "otlp":
		return true
	case "":
	default:
		return true // an exporter Setup refuses by name, rather than ignores
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracer provider the environment describes: OTLP over
// HTTP (the exporter reads OTEL_EXPORTER_OTLP_*; the SDK reads
// OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES; OTEL_SERVICE_NAME
// defaults to oncehook), or a no-op one when tracing is off. shutdown
// flushes what is buffered.
func Setup(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(os.Getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: oncehook exports otlp (or none)", e)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, semconv.ServiceName("oncehook"))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Inject writes ctx's span into a traceparent string ("" when ctx has no
// recording span): what an event stores, so its deliveries continue the
// trace of the request that brought it.
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Parent is traceparent as W3C writes it (lower-case, normalised), or ""
// when it is not one: what a transport carried in a header is anybody's,
// and only a well-formed parent is kept, to be continued.
func Parent(traceparent string) string {
	return Inject(Extract(context.Background(), traceparent))
}

// Extract is Inject's inverse: a context carrying the stored parent.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
