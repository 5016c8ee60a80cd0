package body

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Visitor is what a Reader finds in a whole JSON reply read as it is
// relayed: it reads the reply's top-level members and the elements of
// those it reads as lists, and holds what they name until Flush.
type Visitor interface {
	// Member reads the value of the top-level member key from dec
	// (decodes or skips it), or, returning true without reading it, asks
	// for it to be read as a list, an element at a time (Element); a
	// value of such a member that is not a list is skipped.
	Member(key string, dec *json.Decoder) (list bool, err error)
	// Element reads the next element of a list member from dec.
	Element(dec *json.Decoder) error
	// Found reports whether what was read names anything not handed on.
	Found() bool
	// Flush hands on what was read and forgets it: final once the reply
	// was read whole (what is left, possibly nothing).
	Flush(final bool)
}

// Skip reads past the next value of dec.
func Skip(dec *json.Decoder) error {
	var v json.RawMessage
	return dec.Decode(&v)
}

// Reader relays a whole JSON reply too large to hold, byte for byte, and
// reads it as it goes through a Visitor, which hands on what the reply
// names before any byte naming it is read from the Reader. It decodes
// with encoding/json's Decoder, one top-level member or one element of a
// list at a time, and holds at most about three times its limit: the
// decoder's unread input and the bytes it has read and not yet handed
// out, each bounded by one value of at most limit bytes (a member other
// than the lists, or one element) and what was read with it. It reads
// no more than total bytes of the reply (decoding costs some 20 ns a
// byte). A value larger than limit, a reply larger than total or that is
// not a JSON object stops the reading: what it names from there on is
// never handed on (fail), and the rest is relayed as it comes. It is
// used by one goroutine.
type Reader struct {
	src          io.Reader
	dec          *json.Decoder
	limit, total int64
	v            Visitor
	fail         func(error)

	pending []byte // bytes read from src and not yet handed out
	base    int64  // the reply's offset of pending[0]
	read    int64  // bytes read from src
	safe    int64  // the offset up to which bytes may be handed out
	depth   int    // 1 in the top-level object, 2 in a list
	over    bool   // the reading ended (read whole, or stopped)
	srcErr  error  // src's error, once pending is handed out
}

// FlushBytes is how many bytes read past what was last handed on a
// Reader holds before handing on what it found.
const FlushBytes = 1 << 20

// NewReader returns a Reader relaying src through v, which calls fail
// once it stops reading: a value over limit bytes, a reply over total
// bytes or that is not a JSON object, a value v cannot read.
func NewReader(src io.Reader, limit, total int64, v Visitor, fail func(error)) *Reader {
	r := &Reader{src: src, limit: limit, total: total, v: v, fail: fail}
	r.dec = json.NewDecoder(readerSource{r})
	return r
}

// readerSource is what a Reader's decoder reads: src, each byte kept in
// pending until it is handed out.
type readerSource struct{ r *Reader }

func (s readerSource) Read(p []byte) (int, error) {
	r := s.r
	// The decoder holds what it read past its offset (one value, and
	// what was read with it): no more than limit bytes, and it reads
	// no more than that at once.
	room := r.limit - (r.read - r.dec.InputOffset())
	if room < 0 {
		return 0, fmt.Errorf("a value of the reply is larger than %d bytes", r.limit)
	}
	if r.read >= r.total {
		return 0, fmt.Errorf("the reply is larger than %d bytes", r.total)
	}
	if int64(len(p)) > min(room+1, r.total-r.read) {
		p = p[:min(room+1, r.total-r.read)]
	}
	n, err := r.src.Read(p)
	r.pending = append(r.pending, p[:n]...)
	r.read += int64(n)
	if err != nil && err != io.EOF {
		r.srcErr = err
	}
	return n, err
}

// Read hands out the reply's next bytes, once what they name was handed
// on.
func (r *Reader) Read(p []byte) (int, error) {
	for r.safe == r.base && !r.over {
		r.step()
	}
	if len(r.pending) > 0 {
		n := copy(p, r.pending[:min(int64(len(r.pending)), r.safe-r.base)])
		r.pending = r.pending[n:]
		r.base += int64(n)
		if len(r.pending) == 0 {
			r.pending = nil // the held bytes go with what was handed out
		}
		return n, nil
	}
	if r.srcErr != nil {
		return 0, r.srcErr
	}
	// Read whole or stopped: the rest goes as it comes.
	n, err := r.src.Read(p)
	r.base += int64(n)
	return n, err
}

// Held is how many bytes r holds, read from its source and not yet
// handed out.
func (r *Reader) Held() int { return len(r.pending) }

// step decodes the next top-level member or element, then hands on what
// was found when the reading ended or FlushBytes were read past what was
// handed out, and lets out the bytes decoded so far when nothing read
// from them waits.
func (r *Reader) step() {
	if err := r.next(); err != nil {
		r.over = true
		if err == errReadWhole {
			r.v.Flush(true)
		} else {
			if r.v.Found() {
				r.v.Flush(false) // read whole before what stopped the reading
			}
			r.fail(err)
		}
		r.safe = math.MaxInt64
		return
	}
	if !r.v.Found() {
		r.safe = r.dec.InputOffset()
		return
	}
	if r.read-r.safe >= FlushBytes {
		r.v.Flush(false)
		r.safe = r.dec.InputOffset()
	}
}

// errReadWhole ends a Reader's reading of a reply read whole.
var errReadWhole = errors.New("read whole")

// next decodes the start of the reply, one top-level member or one
// element of a list; errReadWhole once the top-level object is closed.
func (r *Reader) next() error {
	if r.depth == 0 { // the start: next is not called past the end
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		if tok != json.Delim('{') {
			return errors.New("the reply is not a JSON object")
		}
		r.depth = 1
		return nil
	}
	if r.depth == 2 {
		if r.dec.More() {
			return r.v.Element(r.dec)
		}
		_, err := r.dec.Token() // ]
		r.depth = 1
		return err
	}
	if !r.dec.More() {
		if _, err := r.dec.Token(); err != nil { // }
			return err
		}
		return errReadWhole
	}
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	key, _ := tok.(string)
	list, err := r.v.Member(key, r.dec)
	if err != nil || !list {
		return err
	}
	return r.list()
}

// list reads the start of a member read as a list: a list is read an
// element at a time (next), any other value skipped.
func (r *Reader) list() error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		r.depth = 2
	case json.Delim('{'):
		for open := 1; open > 0; { // skip the object, token by token
			tok, err := r.dec.Token()
			if err != nil {
				return err
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				open++
			case json.Delim('}'), json.Delim(']'):
				open--
			}
		}
	}
	return nil
}
