package sse

import (
	"errors"
	"reflect"
	"testing"
)

// collect decodes stream written in pieces of size step.
func collect(t *testing.T, stream string, step int) []Event {
	t.Helper()
	var got []Event
	d := NewDecoder(0, func(e Event) error {
		got = append(got, Event{Type: e.Type, Data: append([]byte(nil), e.Data...)})
		return nil
	})
	b := []byte(stream)
	for len(b) > 0 {
		n := min(step, len(b))
		if w, err := d.Write(b[:n]); err != nil || w != n {
			t.Fatalf("Write = %d, %v", w, err)
		}
		b = b[n:]
	}
	return got
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []Event
	}{
		{"typed", "event: ping\ndata: {\"type\":\"ping\"}\n\n", []Event{{"ping", []byte(`{"type":"ping"}`)}}},
		{"untyped", "data: 1\n\ndata:2\n\n", []Event{{"message", []byte("1")}, {"message", []byte("2")}}},
		{"multi-line data", "event: x\ndata: a\ndata:  b\ndata\n\n", []Event{{"x", []byte("a\n b\n")}}},
		{"CRLF and CR", "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r", []Event{{"a", []byte("1")}, {"b", []byte("2")}}},
		{"comments and unknown fields", ": keep-alive\nid: 7\nretry: 10\ndata: z\n\n", []Event{{"message", []byte("z")}}},
		{"no data is no event", "event: a\n\n\n\ndata: y\n\n", []Event{{"message", []byte("y")}}},
		{"unterminated event dropped", "data: 1\n\ndata: 2\n", []Event{{"message", []byte("1")}}},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			t.Run(tt.name, func(t *testing.T) {
				if got := collect(t, tt.stream, step); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("step %d: got %q, want %q", step, got, tt.want)
				}
			})
		}
	}
}

func TestDecoderLimit(t *testing.T) {
	n := 0
	d := NewDecoder(10, func(Event) error { n++; return nil })
	if _, err := d.Write([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([]byte("data: 2\n\n")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if _, err := d.Write([]byte("\n")); !errors.Is(err, ErrTooLarge) || !errors.Is(d.Err(), ErrTooLarge) {
		t.Fatalf("later write: %v", err)
	}
	if n != 1 {
		t.Errorf("%d events, want 1", n)
	}
}

func TestDecoderCallbackError(t *testing.T) {
	boom := errors.New("boom")
	d := NewDecoder(0, func(Event) error { return boom })
	if _, err := d.Write([]byte("data: 1\n\ndata: 2\n\n")); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
