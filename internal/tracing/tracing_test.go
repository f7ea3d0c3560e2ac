package tracing

import (
	"context"
	"testing"
)

// OTEL_SDK_DISABLED=true is the standard switch that turns every signal off,
// whatever else the environment sets: a platform that exports
// OTEL_EXPORTER_OTLP_ENDPOINT to every service must be able to turn one
// service's traces off with it. Before, oncehook kept exporting.
func TestSDKDisabledTurnsTracingOff(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
	for _, v := range []string{"true", "TRUE", "True"} {
		t.Setenv("OTEL_SDK_DISABLED", v)
		tp, shutdown, err := Setup(context.Background())
		if err != nil {
			t.Fatalf("OTEL_SDK_DISABLED=%s: %v", v, err)
		}
		_, span := tp.Tracer(Name).Start(context.Background(), "receive s")
		if span.IsRecording() {
			t.Errorf("OTEL_SDK_DISABLED=%s with an endpoint set: spans are recorded and exported", v)
		}
		span.End()
		shutdown(context.Background())
	}
	// Anything but true leaves tracing as the rest of the environment says.
	t.Setenv("OTEL_SDK_DISABLED", "false")
	tp, shutdown, err := Setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, span := tp.Tracer(Name).Start(context.Background(), "receive s")
	defer span.End()
	if !span.IsRecording() {
		t.Error("OTEL_SDK_DISABLED=false with an endpoint set: tracing is off")
	}
}
