package ui

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

type preparerFunc func(ctx context.Context, req memory.Request) (memory.Prepared, error)

func (f preparerFunc) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	return f(ctx, req)
}

// Route leaves every request in its derived conversation.
func (f preparerFunc) Route(_ context.Context, id memory.Identity, _ []memory.Message, _ memory.Cut) memory.Routed {
	return memory.Routed{Conversation: id.Conversation}
}

func TestPreviewShowsPartsAgainstTheirShares(t *testing.T) {
	st := mustStore(t)
	got := make(chan memory.Request, 1)
	prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		got <- req
		block, _ := json.Marshal(map[string]string{"role": "system", "content": "<memory>\nPinned:\n- <b>bold</b> goal\n</memory>"})
		return memory.Prepared{
			Messages: append([]json.RawMessage{block, []byte(`{"role":"user","content":"earlier"}`)}, memory.Raws(req.Messages)...),
			Budget:   1000, TokensSent: 400, TokensOriginal: 900,
			Parts: map[string]int{"memory": 200, "pinned": 50, "summary": 120, "recent": 150, "current": 47},
		}, nil
	})
	srv, _ := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	u, err := New(Deps{Guard: adminGuard(), Store: st, Inspect: st, Preparer: prep},
		Options{Shares: Shares{Summary: 0.3, Facts: 0.15, Recall: 0.2}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	u.Register(srv)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	c := browser(t)
	login(t, c, hs.URL, adminKey)
	resp, body := do(t, c, "GET", hs.URL+"/ui/users/alice/preview?tenant=acme&conversation=trip&q=where+do+I+live%3F", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	req := <-got
	if req.Tenant != "acme" || req.User != "alice" || req.Conversation != "trip" || req.Mode != memory.ModeRead ||
		len(req.Messages) != 1 || req.Messages[0].Content != "where do I live?" {
		t.Errorf("preview asked %+v", req)
	}
	for _, want := range []string{
		`<tr data-part="summary"><td><i class="swatch p-summary"></i>Summary</td><td class="n">120</td>`,
		`30% = 300`, `15% = 150`,
		`<tr data-part="block"><td><i class="swatch p-block"></i>Memory block framing</td><td class="n">30</td>`,
		`<tr data-part="other"><td><i class="swatch p-other"></i>Reply priming</td><td class="n">3</td>`,
		`400 tokens sent of a 1000-token budget · the full history would cost 900`,
		`msg role-system part-memory`, `msg role-user part-recent`, `msg role-user part-current`,
		`&lt;b&gt;bold&lt;/b&gt; goal`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("preview page lacks %s", want)
		}
	}
}

func TestGroupFactsAttachesWhatEachReplaced(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) *time.Time { x := now.Add(time.Duration(h) * time.Hour); return &x }
	all := []memory.Fact{ // newest first, as the store lists them
		{ID: 3, Type: memory.FactProfile, Key: "City", Value: "Lisbon"},
		{ID: 2, Type: memory.FactProfile, Key: "city", Value: "Porto", SupersededAt: at(-1)},
		{ID: 1, Type: memory.FactProfile, Key: "city ", Value: "Braga", SupersededAt: at(-2)},
		{ID: 5, Type: memory.FactGoal, Key: "trip", Value: "Japan", ExpiresAt: at(-3)},
		{ID: 4, Type: memory.FactPreference, Key: "city", Value: "Coimbra", SupersededAt: at(-4)},
	}
	cur, past := groupFacts(all, now)
	if len(cur) != 1 || cur[0].ID != 3 || len(cur[0].Replaced) != 2 || cur[0].Replaced[0].Value != "Porto" || cur[0].Replaced[1].Value != "Braga" {
		t.Errorf("current = %+v", cur)
	}
	if len(past) != 2 || past[0].ID != 5 || past[1].ID != 4 {
		t.Errorf("past = %+v", past)
	}
}

func TestDrawChartBinsBuckets(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	ch := drawChart([]memory.SavingsBucket{
		{Start: from, TokensOriginal: 1000, TokensSent: 200, Requests: 2},
		{Start: from.Add(2 * time.Minute), TokensOriginal: 1000, TokensSent: 300, Requests: 1},
		{Start: from.Add(59 * time.Minute), TokensOriginal: 500, TokensSent: 500, Requests: 1},
	}, from, to, 12)
	if !ch.HasData || len(ch.Bars) != 12 || ch.MaxLabel != "2,000" {
		t.Fatalf("chart %+v", ch)
	}
	b0, b11 := ch.Bars[0], ch.Bars[11]
	if b0.Original != 2000 || b0.Sent != 500 || b0.Requests != 3 || b11.Original != 500 {
		t.Errorf("bins %+v / %+v", b0, b11)
	}
	if b0.OrigH != chartBottom-chartTop || b0.SentH != (chartBottom-chartTop)/4 || b0.OrigY+b0.OrigH != chartBottom {
		t.Errorf("bar geometry %+v", b0)
	}
	if empty := drawChart(nil, from, to, 12); empty.HasData {
		t.Error("empty chart has data")
	}
}
