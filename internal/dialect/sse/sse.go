// Package sse decodes a server-sent event stream (the WHATWG "event stream"
// format) fed in arbitrary pieces, as a tee hands them over: lines end in
// CRLF, LF or CR; "event:" names an event; consecutive "data:" lines are
// joined with "\n"; a blank line dispatches; comment lines (":") and unknown
// fields are ignored; an event still open when the stream ends is dropped.
package sse

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrTooLarge reports a stream longer than the decoder's limit.
var ErrTooLarge = errors.New("event stream exceeds the capture limit")

// Event is one dispatched event: its type ("message" when the stream named
// none) and its data lines joined with "\n". TooLarge reports an event
// larger than the decoder's event limit (NewEventDecoder), handed on
// without its data.
type Event struct {
	Type     string
	Data     []byte
	TooLarge bool
}

// Decoder splits the bytes written to it into events and hands each one to
// a callback. It is used by one goroutine. After the first error (the limit
// passed, or the callback failed) every Write returns that error and nothing
// more is decoded.
type Decoder struct {
	limit int64
	total int64
	// eventLimit bounds the bytes of one event held (its data, the line
	// being read); over marks the event past it, lineOver the line.
	eventLimit     int64
	over, lineOver bool
	fn             func(Event) error
	line           []byte // the line being read, without its terminator
	afterCR        bool   // the previous byte ended a line with CR: skip one LF
	typ            string
	data           []byte
	hasData        bool
	err            error
}

// NewDecoder returns a Decoder that calls fn for every event and fails with
// ErrTooLarge once more than limit bytes were written (limit <= 0: no
// limit). The Event's Data is only valid during the call.
func NewDecoder(limit int64, fn func(Event) error) *Decoder {
	return &Decoder{limit: limit, fn: fn}
}

// NewEventDecoder returns a Decoder that calls fn for every event of a
// stream of any length, holding no more than about twice eventLimit
// bytes: an event whose data (its data lines joined), or one of whose
// lines (without its end), is longer than eventLimit bytes is handed on
// with its type and TooLarge, without its data (eventLimit > 0).
func NewEventDecoder(eventLimit int64, fn func(Event) error) *Decoder {
	return &Decoder{eventLimit: eventLimit, fn: fn}
}

// Write decodes p. It never retains p.
func (d *Decoder) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n := len(p)
	d.total += int64(n)
	if d.limit > 0 && d.total > d.limit {
		d.err = fmt.Errorf("%w (%d bytes)", ErrTooLarge, d.limit)
		return 0, d.err
	}
	for len(p) > 0 {
		if d.afterCR {
			d.afterCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			d.addLine(p)
			break
		}
		d.addLine(p[:i])
		d.afterCR = p[i] == '\r'
		p = p[i+1:]
		if err := d.processLine(d.line); err != nil {
			d.err = err
			return 0, err
		}
		d.line, d.lineOver = d.line[:0], false
	}
	return n, nil
}

// addLine adds b to the line being read; past the event limit, only the
// line's first eventLimit bytes are kept (enough to tell its field).
func (d *Decoder) addLine(b []byte) {
	if d.eventLimit > 0 && int64(len(d.line)+len(b)) > d.eventLimit {
		b = b[:max(0, d.eventLimit-int64(len(d.line)))]
		d.lineOver = true
	}
	d.line = append(d.line, b...)
}

// Err returns the error that stopped decoding, or nil.
func (d *Decoder) Err() error { return d.err }

// processLine interprets one complete line.
func (d *Decoder) processLine(line []byte) error {
	if len(line) == 0 {
		return d.dispatch()
	}
	if line[0] == ':' {
		return nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		d.typ = string(value)
		if d.lineOver {
			d.tooLarge()
		}
	case "data":
		if d.hasData && !d.over {
			d.data = append(d.data, '\n')
		}
		d.hasData = true
		if d.lineOver || d.eventLimit > 0 && int64(len(d.data)+len(value)) > d.eventLimit {
			d.tooLarge()
		}
		if !d.over {
			d.data = append(d.data, value...)
		}
	}
	return nil
}

// tooLarge marks the event being read as past the event limit, and
// lets its data go.
func (d *Decoder) tooLarge() {
	d.over = true
	d.data = nil
}

// dispatch hands the pending event to the callback, if it has data.
func (d *Decoder) dispatch() error {
	typ, has, over := d.typ, d.hasData, d.over
	d.typ, d.hasData, d.over = "", false, false
	if !has {
		d.data = d.data[:0]
		return nil
	}
	if typ == "" {
		typ = "message"
	}
	ev := Event{Type: typ, Data: d.data, TooLarge: over}
	if over {
		ev.Data = nil
	}
	err := d.fn(ev)
	d.data = d.data[:0]
	return err
}
