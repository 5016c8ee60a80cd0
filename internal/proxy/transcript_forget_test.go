package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestPrintsOfAStreamOfAnErasedUserAreNotKept: a stream under way when its
// user is erased (Proxy.Forget, as the erasure, or its notice, calls it)
// ends after the erasure; its exchange, received before it, is erased
// data (the store refuses it), so its prints are kept neither in this
// process nor in the shared ones — where they would tell the user's next
// requests quoting it for requests about a chat, and hold hashes of what
// they said.
func TestPrintsOfAStreamOfAnErasedUserAreNotKept(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	captured := make(chanCapturer, 2)
	shared := &memPrints{}
	g := mustGateway(t, up, func(cfg *gatewayConfig) { cfg.SkipTranscripts = true },
		Deps{Resolver: identity.New(nil), Capturer: captured, Prints: shared})
	said := "My sister Alice moved to Porto last year with her two cats."
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"`+said+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", "ana")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	feed.Send(t, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"That is lovely, Porto is a beautiful city by the river"},"finish_reason":null}]}`)
	readEvent(t, br)
	tenant := memory.DefaultTenant
	g.p.Forget(tenant, "ana") // the erasure, while the reply streams
	feed.Send(t, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	feed.End(t)
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
	var ex memory.Exchange
	select {
	case ex = <-captured:
	case <-time.After(10 * time.Second):
		t.Fatal("the exchange was not captured")
	}
	if ex.Tenant != tenant || ex.User != "ana" {
		t.Fatalf("captured as %s/%s", ex.Tenant, ex.User)
	}
	k := transcriptKey(tenant, "ana")
	if own := g.p.transcripts.own(k, time.Time{}); len(own) != 0 {
		t.Errorf("%d prints of the erased user's exchange kept in this process, want none", len(own))
	}
	g.p.Wait()
	if lists, _ := shared.Prints(context.Background(), k); len(lists) != 0 {
		t.Errorf("%d prints of the erased user's exchange shared, want none", len(lists))
	}
}

// hookedPrints is memPrints calling added inside each AddPrint, before
// the write lands.
type hookedPrints struct {
	*memPrints
	added func()
}

func (h hookedPrints) AddPrint(ctx context.Context, user [32]byte, print []byte, keep int, ttl time.Duration) error {
	h.added()
	return h.memPrints.AddPrint(ctx, user, print, keep, ttl)
}

// TestForgetBeatsAPrintWriteUnderWay: a forget that lands while an
// exchange's prints are being shared (its deletion before the write
// lands) leaves none shared once the write is done; another user's stay.
func TestForgetBeatsAPrintWriteUnderWay(t *testing.T) {
	ctx := context.Background()
	store := &memPrints{}
	ana, bob := transcriptKey("t", "ana"), transcriptKey("t", "bob")
	var tr *transcripts
	tr = newTranscripts(time.Now, hookedPrints{store, func() {
		if err := tr.forget(ctx, ana); err != nil {
			t.Error(err)
		}
	}}, time.Second)
	said, reply := "I am planning a trip to Kyoto in April.", "Great choice! April is cherry blossom season."
	for _, k := range []prefixKey{bob, ana} {
		gen := tr.generation()
		p, ok := tr.rememberSince(gen, k, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply})
		if !ok {
			t.Fatal("the exchange was not kept")
		}
		if err := tr.shareSince(ctx, gen, k, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := store.Prints(ctx, ana); len(got) != 0 {
		t.Errorf("%d prints shared of a user forgotten while they were written, want none", len(got))
	}
	if got, _ := store.Prints(ctx, bob); len(got) != 1 {
		t.Errorf("%d prints shared of bob, forgotten by no one, want 1", len(got))
	}
}

// TestClearKeepsThePrintsOfAnExchangeUnderWay: a clear (the erasure
// notices' subscription starting, as in a process just begun serving)
// while an exchange is under way drops the prints kept before it, and
// keeps the exchange's own, in this process and shared: a fresh
// process's first exchange tells its user's app requests about the chat.
func TestClearKeepsThePrintsOfAnExchangeUnderWay(t *testing.T) {
	ctx := context.Background()
	store := &memPrints{}
	tr := newTranscripts(time.Now, store, time.Second)
	ana, bob := transcriptKey("t", "ana"), transcriptKey("t", "bob")
	said, reply := "I am planning a trip to Kyoto in April.", "Great choice! April is cherry blossom season."
	turn, answer := []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply}
	if _, ok := tr.rememberSince(tr.generation(), bob, turn, answer); !ok {
		t.Fatal("bob's exchange was not kept")
	}
	gen := tr.generation() // ana's exchange received
	tr.clear()
	p, ok := tr.rememberSince(gen, ana, turn, answer)
	if !ok {
		t.Fatal("an exchange under way at a clear kept no prints")
	}
	if err := tr.shareSince(ctx, gen, ana, p); err != nil {
		t.Fatal(err)
	}
	if own := tr.own(ana, time.Time{}); len(own) != 1 {
		t.Errorf("%d prints of ana's exchange kept in this process, want 1", len(own))
	}
	if got, _ := store.Prints(ctx, ana); len(got) != 1 {
		t.Errorf("%d prints of ana's exchange shared, want 1", len(got))
	}
	if own := tr.own(bob, time.Time{}); len(own) != 0 {
		t.Errorf("%d prints of bob's, kept before the clear, still in this process, want none", len(own))
	}
}
