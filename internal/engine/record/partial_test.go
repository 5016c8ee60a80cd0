package record

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
)

// TestCaptureQueuesPartialRedactedAndSanitized: the partial reply a
// continue went on with (memory.Exchange.Partial) is redacted and
// sanitized with the rest of the exchange before it is queued, and comes
// back from the queue's payload as it went in.
func TestCaptureQueuesPartialRedactedAndSanitized(t *testing.T) {
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := "sk-" + strings.Repeat("Zq7", 10)
	q, s := newFakeQueue(), newFakeSaver()
	s.setFail(errDown) // to the queue
	c := mustCapturer(t, q, s, r, Options{})
	ex := exchange(t, "ex1", "tell me", " and more")
	partial := memory.Message{Role: "assistant", Content: "the key is " + secret + "\x00",
		Raw: json.RawMessage(`{"role":"assistant","content":"the key is ` + secret + `\u0000"}`)}
	ex.Prior, ex.Turn = ex.Turn, nil
	ex.Partial = &partial
	c.Capture(context.Background(), ex)
	payloads := q.payloads()
	if len(payloads) != 1 {
		t.Fatalf("payloads = %d", len(payloads))
	}
	p := payloads[0]
	if bytes.Contains(p, []byte(secret)) || bytes.Contains(p, []byte(`\u0000`)) {
		t.Fatalf("queue payload holds the partial reply's secret or NUL: %s", p)
	}
	var back memory.Exchange
	if err := json.Unmarshal(p, &back); err != nil {
		t.Fatal(err)
	}
	if back.Partial == nil || back.Partial.Role != "assistant" || !strings.HasPrefix(back.Partial.Content, "the key is [redacted:openai_key]") || strings.ContainsRune(back.Partial.Content, 0) {
		t.Fatalf("queued partial %+v, want it redacted and sanitized", back.Partial)
	}
	if !strings.Contains(ex.Partial.Content, secret) {
		t.Error("Capture modified the caller's partial reply")
	}
	// An exchange without one queues none.
	if b, err := json.Marshal(memory.Exchange{}); err != nil || bytes.Contains(b, []byte("partial")) {
		t.Fatalf("an exchange without a partial reply encodes %s (%v)", b, err)
	}
}

// recordingAdopter records the history each Adopt is given.
type recordingAdopter struct{ priors [][]memory.Message }

func (a *recordingAdopter) Adopt(_ context.Context, _ memory.Identity, _ string, prior []memory.Message, _ time.Time, _ memory.Fence) (int, error) {
	a.priors = append(a.priors, prior)
	return 0, nil
}

func (a *recordingAdopter) Continued(context.Context, memory.Exchange) (bool, error) {
	return false, nil
}

// TestAdoptFirstTurnsWithPartial: a continue adopts with the history the
// client sent — its Prior and the partial reply it went on with — so it
// matches its own chat's first turn only; its Prior is left as it was.
func TestAdoptFirstTurnsWithPartial(t *testing.T) {
	u := memory.Message{Role: "user", Content: "hi"}
	part := memory.Message{Role: "assistant", Content: "Once upon"}
	prior := make([]memory.Message, 1, 4)
	prior[0] = u
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name    string
		partial *memory.Message
		want    []string
	}{
		{"no partial", nil, []string{"hi"}},
		{"partial", &part, []string{"hi", "Once upon"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &recordingAdopter{}
			ex := memory.Exchange{Derived: true, Prior: prior, Partial: tt.partial}
			if err := adoptFirstTurns(context.Background(), a, ex, logger); err != nil {
				t.Fatal(err)
			}
			if len(a.priors) != 1 {
				t.Fatalf("Adopt called %d times", len(a.priors))
			}
			var got []string
			for _, m := range a.priors[0] {
				got = append(got, m.Content)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("adopted with %q, want %q", got, tt.want)
			}
			if len(ex.Prior) != 1 || prior[:2][1].Content != "" {
				t.Fatal("adoption changed the exchange's Prior or its backing array")
			}
		})
	}
}
