package tracing

import (
	"context"
	"errors"
	"testing"
)

func TestSetupReadsTheStandardVariables(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		enabled  bool
		exporter string
		err      error
	}{
		{"nothing set: off", nil, false, "none", nil},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, "none", nil},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, "none", nil},
		{"endpoint alone: otlp over http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, "otlp/http", nil},
		{"traces endpoint alone", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, "otlp/http", nil},
		{"otlp over grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, "otlp/grpc", nil},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, "otlp/http", nil},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "", ErrUnsupported},
		{"unknown protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, "", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Setup(context.Background(), func(k string) string { return tt.env[k] }, "test")
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			defer tr.Shutdown(context.Background())
			if tr.Enabled != tt.enabled || tr.Exporter != tt.exporter {
				t.Fatalf("enabled %v exporter %q, want %v %q", tr.Enabled, tr.Exporter, tt.enabled, tt.exporter)
			}
			if _, span := tr.Provider.Tracer("t").Start(context.Background(), "s"); span.IsRecording() != tt.enabled {
				t.Fatalf("span recording = %v, want %v", span.IsRecording(), tt.enabled)
			}
		})
	}
}

func TestUserIDsOnlyWhenConfigured(t *testing.T) {
	for _, v := range []string{"", "false", "true"} {
		tr, err := Setup(context.Background(), func(k string) string {
			if k == "GATEWAY_TRACE_USER_IDS" {
				return v
			}
			return map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}[k]
		}, "test")
		if err != nil {
			t.Fatal(err)
		}
		tr.Shutdown(context.Background())
		if tr.UserIDs != (v == "true") {
			t.Fatalf("GATEWAY_TRACE_USER_IDS=%q: UserIDs %v", v, tr.UserIDs)
		}
	}
}
