package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Who names the memory a request reads and writes.
type Who struct {
	User string
	// Conversation is X-Memory-Conversation ("": not sent, the gateway
	// derives the conversation from the resent history).
	Conversation string
	// Mode is X-Memory-Mode ("" is on).
	Mode string
	// Budget is X-Memory-Budget (0: none).
	Budget int
	// At is when the user's message was said, sent in the header named
	// AtHeader as RFC 3339 (either empty: not sent); the gateway takes it
	// as X-Memory-Timestamp.
	At       time.Time
	AtHeader string
}

// Reply is what the gateway answered to a chat request.
type Reply struct {
	Content string
	// TokensOriginal, TokensSent are the X-Memory-Tokens-* headers (-1 when
	// absent).
	TokensOriginal, TokensSent int
	Degraded, OverBudget       bool
}

// Chat sends a non-streaming chat completion with messages for who.
func (g *Gateway) Chat(ctx context.Context, model string, who Who, messages []json.RawMessage) (Reply, error) {
	body, err := json.Marshal(map[string]any{"model": model, "messages": messages})
	if err != nil {
		return Reply{}, fmt.Errorf("encode chat request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Reply{}, fmt.Errorf("chat request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer not-a-real-key")
	req.Header.Set("X-Memory-User", who.User)
	if who.Conversation != "" {
		req.Header.Set("X-Memory-Conversation", who.Conversation)
	}
	if who.Mode != "" {
		req.Header.Set("X-Memory-Mode", who.Mode)
	}
	if who.Budget > 0 {
		req.Header.Set("X-Memory-Budget", strconv.Itoa(who.Budget))
	}
	if who.AtHeader != "" && !who.At.IsZero() {
		req.Header.Set(who.AtHeader, who.At.Format(time.RFC3339))
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return Reply{}, fmt.Errorf("chat: %w", err)
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, fmt.Errorf("read chat reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("chat: status %d: %s", resp.StatusCode, b)
	}
	var cc struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &cc); err != nil || len(cc.Choices) == 0 {
		return Reply{}, fmt.Errorf("chat reply is not a chat completion: %s", b)
	}
	h := func(name string) int {
		n, err := strconv.Atoi(resp.Header.Get(name))
		if err != nil {
			return -1
		}
		return n
	}
	return Reply{
		Content:        cc.Choices[0].Message.Content,
		TokensOriginal: h("X-Memory-Tokens-Original"),
		TokensSent:     h("X-Memory-Tokens-Sent"),
		Degraded:       resp.Header.Get("X-Memory-Degraded") != "",
		OverBudget:     resp.Header.Get("X-Memory-Over-Budget") == "true",
	}, nil
}

// StoredMessages returns how many live messages the gateway has stored for
// the conversation (0 when it does not exist yet).
func (g *Gateway) StoredMessages(ctx context.Context, user, conversation string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/v1/memory/conversations/"+conversation+"?limit=1&user="+user, nil)
	if err != nil {
		return 0, fmt.Errorf("conversation request: %w", err)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get conversation: %w", err)
	}
	defer drain(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("get conversation: status %d: %s", resp.StatusCode, b)
	}
	// The answer holds a page of the messages; the conversation counts
	// them all.
	var c struct {
		Conversation struct {
			MessageCount int `json:"message_count"`
		} `json:"conversation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return 0, fmt.Errorf("decode conversation: %w", err)
	}
	return c.Conversation.MessageCount, nil
}

// WaitStored polls until the conversation holds at least n messages, or ctx
// ends.
func (g *Gateway) WaitStored(ctx context.Context, user, conversation string, n int) error {
	for {
		got, err := g.StoredMessages(ctx, user, conversation)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("conversation %s holds %d messages, want %d: %w", conversation, got, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Metric returns the sum of the samples of a Prometheus counter or gauge
// named name on /metrics (0 when absent).
func (g *Gateway) Metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/metrics", nil)
	if err != nil {
		return 0, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get metrics: %w", err)
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	return sumMetric(string(b), name), nil
}

// processedMetrics are the worker and capturer counters whose sum is the
// number of exchanges fully handled: stored (after-save hooks — indexing,
// fact extraction, compaction — included), found duplicate, or refused.
var processedMetrics = []string{
	"memgate_capture_saved_total",
	"memgate_capture_duplicates_total",
	"memgate_capture_erased_total",
	"memgate_capture_poison_total",
	"memgate_capture_direct_saved_total",
	"memgate_capture_direct_duplicates_total",
}

// Processed returns how many captured exchanges the gateway has fully
// handled.
func (g *Gateway) Processed(ctx context.Context) (int, error) {
	var done float64
	for _, m := range processedMetrics {
		v, err := g.Metric(ctx, m)
		if err != nil {
			return 0, err
		}
		done += v
	}
	return int(done), nil
}

// WaitProcessed polls until the gateway has handled n exchanges and idle
// reports no side work under way (the upstream answering no summary or
// extraction call), or ctx ends.
func (g *Gateway) WaitProcessed(ctx context.Context, n int, idle func() bool) error {
	for {
		done, err := g.Processed(ctx)
		if err != nil {
			return err
		}
		if done >= n && (idle == nil || idle()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway handled %d of %d exchanges: %w", done, n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Said is one message of an import: its role, text and when it was said.
type Said struct {
	Role, Content string
	At            time.Time
}

// Imported is the gateway's answer to an import.
type Imported struct {
	Exchanges  int `json:"exchanges"`
	Stored     int `json:"stored"`
	Duplicates int `json:"duplicates"`
}

// Import sends past messages of one conversation, with their times, to the
// gateway's POST /v1/memory/import.
func (g *Gateway) Import(ctx context.Context, user, conversation string, msgs []Said) (Imported, error) {
	type wireMsg struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		Timestamp string `json:"timestamp"`
	}
	wm := make([]wireMsg, len(msgs))
	for i, m := range msgs {
		wm[i] = wireMsg{m.Role, m.Content, m.At.UTC().Format(time.RFC3339Nano)}
	}
	body, err := json.Marshal(map[string]any{"user": user, "conversation": conversation, "messages": wm})
	if err != nil {
		return Imported{}, fmt.Errorf("encode import: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/memory/import", bytes.NewReader(body))
	if err != nil {
		return Imported{}, fmt.Errorf("import request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return Imported{}, fmt.Errorf("import: %w", err)
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Imported{}, fmt.Errorf("read import answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Imported{}, fmt.Errorf("import: status %d: %s", resp.StatusCode, b)
	}
	var out Imported
	if err := json.Unmarshal(b, &out); err != nil {
		return Imported{}, fmt.Errorf("decode import answer %s: %w", b, err)
	}
	return out, nil
}

// WaitEnriched polls until the gateway has run the after-save work
// (indexing, fact extraction, compaction) of n stored exchanges and idle
// reports no side work under way, or ctx ends.
func (g *Gateway) WaitEnriched(ctx context.Context, n int, idle func() bool) error {
	for {
		done, err := g.Metric(ctx, "memgate_enrich_exchanges_total")
		if err != nil {
			return err
		}
		if int(done) >= n && (idle == nil || idle()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway enriched %.0f of %d exchanges: %w", done, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
