package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/testenv"
)

// publishAll takes and settles every notice o holds, as published, and
// returns their payloads in order.
func publishAll(o *outbox) []string {
	var out []string
	for {
		payload, undo, ok := o.take()
		if !ok {
			return out
		}
		o.done(true, undo)
		out = append(out, payload)
	}
}

func payloadOf(tenant, user string) string {
	b, _ := json.Marshal(notice{Tenant: tenant, User: user})
	return string(b)
}

// TestOutbox: the notices wait oldest first, each user's once; one
// being published when its user is erased again is queued anew; one
// that fails goes back first, unless queued anew meanwhile; past the
// bound they all give way to one notice to forget everyone, which
// supersedes what is queued until it is taken.
func TestOutbox(t *testing.T) {
	a, b, c, d := notice{"acme", "a"}, notice{"acme", "b"}, notice{"acme", "c"}, notice{"acme", "d"}
	pa, pb, pc := payloadOf("acme", "a"), payloadOf("acme", "b"), payloadOf("acme", "c")
	tests := []struct {
		name    string
		run     func(o *outbox)
		pending int
		want    []string
	}{
		{"oldest first, each user once", func(o *outbox) { o.put(a); o.put(b); o.put(a) }, 2, []string{pa, pb}},
		{"erased again while published: queued anew", func(o *outbox) {
			o.put(a)
			_, undo, _ := o.take()
			o.put(a)
			o.done(true, undo)
		}, 1, []string{pa}},
		{"failed: back first", func(o *outbox) {
			o.put(a)
			o.put(b)
			_, undo, _ := o.take()
			o.done(false, undo)
			o.put(c)
		}, 3, []string{pa, pb, pc}},
		{"failed, but queued anew meanwhile: once", func(o *outbox) {
			o.put(a)
			_, undo, _ := o.take()
			o.put(b)
			o.put(a)
			o.done(false, undo)
		}, 2, []string{pb, pa}},
		{"at the bound, a user again: queued once", func(o *outbox) { o.put(a); o.put(b); o.put(c); o.put(a) }, 3, []string{pa, pb, pc}},
		{"forget everyone supersedes what comes before it is taken", func(o *outbox) {
			o.put(a)
			o.put(b)
			o.put(c)
			o.put(d)
		}, 1, []string{everyonePayload}},
		{"forget everyone failed: supersedes what came meanwhile", func(o *outbox) {
			o.put(a)
			o.put(b)
			o.put(c)
			o.put(d)
			_, undo, _ := o.take()
			o.put(a)
			o.done(false, undo)
		}, 1, []string{everyonePayload}},
		{"after forget everyone is taken, notices queue again", func(o *outbox) {
			o.put(a)
			o.put(b)
			o.put(c)
			o.put(d)
			_, undo, _ := o.take()
			o.put(a)
			o.done(true, undo)
		}, 1, []string{pa}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutbox(3)
			tt.run(&o)
			if n := o.pending(); n != tt.pending {
				t.Errorf("pending %d, want %d", n, tt.pending)
			}
			if got := publishAll(&o); !slices.Equal(got, tt.want) {
				t.Errorf("published %q, want %q", got, tt.want)
			}
			if n := o.pending(); n != 0 {
				t.Errorf("pending %d after all were published", n)
			}
		})
	}
}

// TestErasureNoticeToForgetEveryone: past the outbox's bound, the
// notices give way to one that makes every subscribed process forget
// everyone.
func TestErasureNoticeToForgetEveryone(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	logger := slog.New(slog.DiscardHandler)
	received, published := NewErasures(mustClient(t), prefix, logger), NewErasures(mustClient(t), prefix, logger)
	f := &forgets{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); received.Run(ctx, f) }()
	t.Cleanup(func() { cancel(); <-done })
	until(t, "the subscription", func() bool { _, cleared := f.state(); return cleared == 1 })

	for i := range maxPendingNotices + 1 { // Send not running yet: they wait
		published.Publish("acme", fmt.Sprint("u", i))
	}
	sending(t, published)
	until(t, "everyone forgotten", func() bool { _, cleared := f.state(); return cleared == 2 })
	published.Publish("acme", "noor")
	until(t, "noor forgotten", func() bool { users, _ := f.state(); return len(users) == 1 })
	if users, _ := f.state(); users[0] != "acme/noor" {
		t.Fatalf("forgot %q, want only acme/noor", users)
	}
}
