package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/memgate/memgate/internal/capture"
	"github.com/memgate/memgate/internal/memory"
)

// errClientGone reports that writing to the client failed.
var errClientGone = errors.New("client went away")

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// relaySSE copies an event stream to the client line by line, byte for byte,
// flushing whenever everything the upstream sent so far has been written, so
// each event reaches the client as soon as it arrives. The JSON payload of
// each data line (except [DONE]) goes to tee when it is not nil. It returns
// nil when the upstream ended the stream cleanly, errClientGone when the
// client stopped reading, or the upstream read error.
func relaySSE(w http.ResponseWriter, flush func() error, body io.Reader, t *tee) error {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() { br.Reset(nil); readerPool.Put(br) }()
	var (
		partial []byte // a data line longer than the reader's buffer
		inLong  bool
	)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return errClientGone
			}
			if t != nil {
				switch {
				case errors.Is(err, bufio.ErrBufferFull):
					if inLong || bytes.HasPrefix(line, dataPrefix) {
						partial = append(partial, line...)
						inLong = true
					}
				case inLong:
					partial = append(partial, line...)
					t.data(partial)
					partial, inLong = partial[:0], false
				default:
					t.data(line)
				}
			}
			if br.Buffered() == 0 {
				if flush() != nil {
					return errClientGone
				}
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

var dataPrefix = []byte("data:")

// tee feeds stream payloads to a capture.StreamReply on its own goroutine
// through a bounded channel. The relay never waits for it: when the channel
// is full the capture is given up, not the client.
type tee struct {
	ch    chan []byte
	done  chan struct{}
	lost  bool
	reply *capture.StreamReply
	err   error
}

// teeDepth bounds the events waiting for the capture goroutine.
const teeDepth = 512

func newTee() *tee {
	t := &tee{ch: make(chan []byte, teeDepth), done: make(chan struct{}), reply: capture.NewStreamReply()}
	go func() {
		defer close(t.done)
		for p := range t.ch {
			if t.err == nil {
				t.err = t.reply.Add(p)
			}
		}
	}()
	return t
}

// data takes one raw SSE line; data lines other than [DONE] are passed on.
func (t *tee) data(line []byte) {
	if t.lost || !bytes.HasPrefix(line, dataPrefix) {
		return
	}
	p := bytes.TrimSpace(line[len(dataPrefix):])
	if len(p) == 0 || string(p) == "[DONE]" {
		return
	}
	select {
	case t.ch <- bytes.Clone(p):
	default:
		t.lost = true
	}
}

// errTeeOverflow reports a capture given up because the tee fell behind.
var errTeeOverflow = errors.New("capture tee overflowed")

// result waits for the pending payloads and returns the reassembled reply.
func (t *tee) result() (memory.Message, *memory.Usage, error) {
	close(t.ch)
	<-t.done
	switch {
	case t.lost:
		return memory.Message{}, nil, errTeeOverflow
	case t.err != nil:
		return memory.Message{}, nil, t.err
	}
	return t.reply.Result()
}

// abandon stops the tee without a result.
func (t *tee) abandon() { close(t.ch) }
