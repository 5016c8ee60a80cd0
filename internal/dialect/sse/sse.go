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
// none) and its data lines joined with "\n".
type Event struct {
	Type string
	Data []byte
}

// Decoder splits the bytes written to it into events and hands each one to
// a callback. It is used by one goroutine. After the first error (the limit
// passed, or the callback failed) every Write returns that error and nothing
// more is decoded.
type Decoder struct {
	limit   int64
	total   int64
	fn      func(Event) error
	line    []byte // the line being read, without its terminator
	afterCR bool   // the previous byte ended a line with CR: skip one LF
	typ     string
	data    []byte
	hasData bool
	err     error
}

// NewDecoder returns a Decoder that calls fn for every event and fails with
// ErrTooLarge once more than limit bytes were written (limit <= 0: no
// limit). The Event's Data is only valid during the call.
func NewDecoder(limit int64, fn func(Event) error) *Decoder {
	return &Decoder{limit: limit, fn: fn}
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
			d.line = append(d.line, p...)
			break
		}
		d.line = append(d.line, p[:i]...)
		d.afterCR = p[i] == '\r'
		p = p[i+1:]
		if err := d.processLine(d.line); err != nil {
			d.err = err
			return 0, err
		}
		d.line = d.line[:0]
	}
	return n, nil
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
	case "data":
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	}
	return nil
}

// dispatch hands the pending event to the callback, if it has data.
func (d *Decoder) dispatch() error {
	typ, has := d.typ, d.hasData
	d.typ, d.hasData = "", false
	if !has {
		d.data = d.data[:0]
		return nil
	}
	if typ == "" {
		typ = "message"
	}
	err := d.fn(Event{Type: typ, Data: d.data})
	d.data = d.data[:0]
	return err
}
