package sse

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// collect decodes stream written in pieces of size step.
func collect(t *testing.T, stream string, step int) []Event {
	t.Helper()
	return collectWith(t, stream, step, func(fn func(Event) error) *Decoder { return NewDecoder(0, fn) })
}

// collectWith decodes stream written in pieces of size step with the
// decoder newDec returns.
func collectWith(t *testing.T, stream string, step int, newDec func(func(Event) error) *Decoder) []Event {
	t.Helper()
	var got []Event
	d := newDec(func(e Event) error {
		got = append(got, Event{Type: e.Type, Data: append([]byte(nil), e.Data...), TooLarge: e.TooLarge})
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
		{"typed", "event: ping\ndata: {\"type\":\"ping\"}\n\n", []Event{{Type: "ping", Data: []byte(`{"type":"ping"}`)}}},
		{"untyped", "data: 1\n\ndata:2\n\n", []Event{{Type: "message", Data: []byte("1")}, {Type: "message", Data: []byte("2")}}},
		{"multi-line data", "event: x\ndata: a\ndata:  b\ndata\n\n", []Event{{Type: "x", Data: []byte("a\n b\n")}}},
		{"CRLF and CR", "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r", []Event{{Type: "a", Data: []byte("1")}, {Type: "b", Data: []byte("2")}}},
		{"comments and unknown fields", ": keep-alive\nid: 7\nretry: 10\ndata: z\n\n", []Event{{Type: "message", Data: []byte("z")}}},
		{"no data is no event", "event: a\n\n\n\ndata: y\n\n", []Event{{Type: "message", Data: []byte("y")}}},
		{"unterminated event dropped", "data: 1\n\ndata: 2\n", []Event{{Type: "message", Data: []byte("1")}}},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			t.Run(tt.name, func(t *testing.T) {
				if got := collect(t, tt.stream, step); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("step %d: got %+v, want %+v", step, got, tt.want)
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

// TestEventDecoderLimit: a stream of any length is decoded; an event
// whose data, or one of whose lines, is longer than the event limit is handed on with its
// type and TooLarge, without its data, and the events after it as usual.
func TestEventDecoderLimit(t *testing.T) {
	long := strings.Repeat("x", 64)
	tests := []struct {
		name   string
		stream string
		want   []Event
	}{
		{"within", "event: a\ndata: 012345678\n\n", []Event{{Type: "a", Data: []byte("012345678")}}},
		{"one long line", "event: a\ndata: " + long + "\n\nevent: b\ndata: 1\n\n", []Event{{Type: "a", TooLarge: true}, {Type: "b", Data: []byte("1")}}},
		{"lines adding up", "data: 01234567\ndata: 01234567\nevent: c\n\ndata: 2\n\n", []Event{{Type: "c", TooLarge: true}, {Type: "message", Data: []byte("2")}}},
		{"a long type", "event: " + long + "\ndata: 1\n\ndata: 2\n\n", []Event{{Type: long[:8], TooLarge: true}, {Type: "message", Data: []byte("2")}}},
		{"a long comment is no event", ": " + long + "\n\ndata: 3\r\n\r\n", []Event{{Type: "message", Data: []byte("3")}}},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			t.Run(tt.name, func(t *testing.T) {
				got := collectWith(t, tt.stream, step, func(fn func(Event) error) *Decoder { return NewEventDecoder(15, fn) })
				for i := range got {
					if len(got[i].Data) == 0 {
						got[i].Data = nil
					}
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("step %d: got %+v, want %+v", step, got, tt.want)
				}
			})
		}
	}
	// Memory stays bounded however long the event.
	d := NewEventDecoder(15, func(Event) error { return nil })
	chunk := []byte(strings.Repeat("y", 1<<10))
	d.Write([]byte("data: "))
	for range 1 << 10 {
		if _, err := d.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if cap(d.line) > 64 || cap(d.data) > 64 {
		t.Errorf("held %d and %d bytes for a 1 MiB event, want no more than the limit", cap(d.line), cap(d.data))
	}
}
