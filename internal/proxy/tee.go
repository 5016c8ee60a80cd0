package proxy

import (
	"bytes"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// tee feeds an event stream, as read, to the API's replyStream on its own
// goroutine through a bounded channel. The relay never waits for it: when
// the channel is full, or the stream outgrows maxCaptureBytes, the capture
// is given up, not the client. hangUp marks where a client hung up (see
// readOn).
type tee struct {
	ch    chan []byte
	done  chan struct{}
	reply replyStream
	err   error // the replyStream's first error; the goroutine's until done
	// wake tells the goroutine that hangUp wants the stream marked.
	wake chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	// bytes counts every byte fed, queued or not; lost is set once a
	// chunk was not queued (the channel full, or past the cap).
	bytes int
	lost  bool
	// queued and written count the bytes queued, and those the
	// goroutine wrote to the replyStream.
	queued, written int
	// markAt is where hangUp marks the stream (-1: not asked); marked is
	// set once the replyStream was marked there, shown to what its
	// HangUp returned, markErr to the tee's error then; closed once the
	// goroutine ended.
	markAt  int
	marked  bool
	shown   bool
	markErr error
	closed  bool
}

func newTee(reply replyStream) *tee {
	t := &tee{ch: make(chan []byte, teeDepth), done: make(chan struct{}), wake: make(chan struct{}, 1), reply: reply, markAt: -1}
	t.cond = sync.NewCond(&t.mu)
	go t.run()
	return t
}

// feed queues a copy of chunk, or gives the capture up. It counts every
// byte, queued or not, so that a stream over the cap is reported as such
// even when the tee fell behind first.
func (t *tee) feed(chunk []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bytes += len(chunk); t.lost || t.bytes > maxCaptureBytes {
		t.lost = true
		return
	}
	select {
	case t.ch <- bytes.Clone(chunk):
		t.queued += len(chunk)
	default:
		t.lost = true
	}
}

// run writes the chunks to the replyStream until the first error, and
// marks it where hangUp asks.
func (t *tee) run() {
	defer close(t.done)
	defer func() {
		t.mu.Lock()
		t.closed = true
		t.cond.Broadcast()
		t.mu.Unlock()
	}()
	for {
		select {
		case chunk, ok := <-t.ch:
			if !ok {
				return
			}
			if t.err == nil {
				_, t.err = t.reply.Write(chunk)
			}
			t.mu.Lock()
			t.written += len(chunk)
			t.mu.Unlock()
			t.markIfDue()
		case <-t.wake:
			t.markIfDue()
		}
	}
}

// markIfDue marks the replyStream once every chunk queued before hangUp
// asked was written to it.
func (t *tee) markIfDue() {
	t.mu.Lock()
	due := t.markAt >= 0 && !t.marked && t.written >= t.markAt
	err := t.err
	t.mu.Unlock()
	if !due {
		return
	}
	shown := err == nil && t.reply.HangUp()
	t.mu.Lock()
	t.marked, t.shown, t.markErr = true, shown, t.failure()
	t.cond.Broadcast()
	t.mu.Unlock()
}

// failure is why the tee has no result (t.mu held; t.err read on the
// goroutine, or after it ended).
func (t *tee) failure() error {
	switch {
	case t.bytes > maxCaptureBytes:
		return errCaptureTooLarge
	case t.lost:
		return errTeeOverflow
	}
	return t.err
}

// hangUp marks the stream where its client hung up: after the chunks fed
// so far. It reports whether they showed a whole answer
// (replyStream.HangUp), waiting for the goroutine to write them; false
// once the capture was given up or the stream ended. It is called once,
// not on the relay's goroutine or while it feeds.
func (t *tee) hangUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost || t.closed || t.markAt >= 0 {
		return false
	}
	t.markAt = t.queued
	select {
	case t.wake <- struct{}{}:
	default:
	}
	for !t.marked && !t.closed {
		t.cond.Wait()
	}
	return t.marked && t.shown && t.markErr == nil
}

// result waits for the queued chunks and returns the reassembled reply.
func (t *tee) result() (memory.Message, *memory.Usage, error) {
	close(t.ch)
	<-t.done
	if err := t.failure(); err != nil {
		return memory.Message{}, nil, err
	}
	return t.reply.Result()
}

// resultAtHangUp is result by the rule of a hang-up: the reply as it was
// whole where hangUp marked the stream (replyStream.HungUpResult),
// whatever came after; result when it was not marked.
func (t *tee) resultAtHangUp() (memory.Message, *memory.Usage, error) {
	close(t.ch)
	<-t.done
	if !t.marked {
		if err := t.failure(); err != nil {
			return memory.Message{}, nil, err
		}
		return t.reply.Result()
	}
	if t.markErr != nil {
		return memory.Message{}, nil, t.markErr
	}
	return t.reply.HungUpResult()
}

// gaveUp reports whether the capture was given up (the channel full, or
// past the cap).
func (t *tee) gaveUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost
}

// abandon stops the tee without a result.
func (t *tee) abandon() { close(t.ch) }
