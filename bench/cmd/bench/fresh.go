package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/bench/fakeupstream"
	"github.com/memgate/memgate/bench/loadgen"
	"github.com/memgate/memgate/internal/pace"
)

// freshGap is how long after a turn's answer its conversation's next turn
// is sent in the read-your-writes check.
const freshGap = 50 * time.Millisecond

// fresh is the read-your-writes and order check of one memory-on gateway:
// conns connections, each its own new user and conversation, each sending
// turns turns one after the other, every turn freshGap after the previous
// one's answer. Each turn carries a token and asks the fake upstream
// (fakeupstream.RecallMarker) whether the previous turn's token is in the
// prompt memgate sent. Once capture has drained, the conversations are read
// back through the management API and their user messages counted.
type fresh struct {
	server       string
	conns, turns int
	errors       int
	// checked is the turns that asked (all but each conversation's first);
	// hits those whose prompt held the previous turn.
	checked, hits int
	// Of the checked turns, those the gateway marked X-Memory-Degraded:
	// with the conversation's history left out, and with any part left out.
	degradedHistory, degradedAny int
	capture                      captureStat
	// From the store: turns stored, never stored, stored more than once, and
	// stored after a later turn of their conversation.
	stored, lost, duplicated, outOfOrder int
}

// rywShare is the share of checked turns whose prompt held the turn before.
func (f fresh) rywShare() float64 { return f.share(f.hits) }

// share is n as a share of the checked turns.
func (f fresh) share(n int) float64 {
	if f.checked == 0 {
		return 0
	}
	return float64(n) / float64(f.checked)
}

// freshToken names turn k of connection c: fixed width, so no token is a
// prefix of another.
func freshToken(run string, c, k int) string { return fmt.Sprintf("f%s%04d%04d", run, c, k) }

// freshUser is the user (and conversation) of connection c.
func freshUser(server, run string, c int) string {
	return fmt.Sprintf("fresh-%s-%s-%d", server, run, c)
}

// runFresh runs the check against s with conns connections of turns turns.
func runFresh(ctx context.Context, s *server, name string, conns, turns int) (fresh, error) {
	f := fresh{server: name, conns: conns, turns: turns}
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	watch, err := watchCapture(ctx, s)
	if err != nil {
		return f, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	defer client.CloseIdleConnections()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	for c := range conns {
		wg.Go(func() {
			user := freshUser(name, run, c)
			for k := range turns {
				if k > 0 && !pace.Sleep(ctx, freshGap) {
					return
				}
				msg := "note " + freshToken(run, c, k)
				if k > 0 {
					msg += " " + fakeupstream.RecallMarker + freshToken(run, c, k-1)
				}
				seen, degraded, err := freshTurn(ctx, client, s, user, msg)
				mu.Lock()
				switch {
				case err != nil:
					f.errors++
					if firstErr == nil {
						firstErr = err
					}
				case k > 0:
					f.checked++
					if seen {
						f.hits++
					}
					history, anyPart := loadgen.DegradedParts(degraded)
					if history {
						f.degradedHistory++
					}
					if anyPart {
						f.degradedAny++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if f.errors == conns*turns {
		return f, fmt.Errorf("read-your-writes check: every request failed (first: %w)", firstErr)
	}
	if f.capture, err = watch.finish(ctx, 90*time.Second); err != nil {
		return f, err
	}
	for c := range conns {
		ks, err := storedTurns(ctx, s, freshUser(name, run, c))
		if err != nil {
			return f, err
		}
		t := tally(ks, turns)
		f.stored, f.lost, f.duplicated, f.outOfOrder = f.stored+t.stored, f.lost+t.lost, f.duplicated+t.duplicated, f.outOfOrder+t.outOfOrder
	}
	return f, nil
}

// turnTally counts a conversation's stored turns against the turns sent.
type turnTally struct{ stored, lost, duplicated, outOfOrder int }

// tally counts, of turns 0..turns-1 sent in order, those stored (ks: the
// turn numbers in stored order), never stored, stored more than once, and
// stored after a later turn.
func tally(ks []int, turns int) turnTally {
	var t turnTally
	count := map[int]int{}
	for i, k := range ks {
		count[k]++
		if i > 0 && k < ks[i-1] {
			t.outOfOrder++
		}
	}
	for k := range turns {
		if n := count[k]; n == 0 {
			t.lost++
		} else {
			t.stored++
			t.duplicated += n - 1
		}
	}
	return t
}

// freshTurn sends one memory-on turn as user and reports what the fake
// upstream said of the previous turn's token, and the gateway's
// X-Memory-Degraded (empty when all of memory loaded).
func freshTurn(ctx context.Context, client *http.Client, s *server, user, msg string) (seen bool, degraded string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.baseURL+"/chat/completions",
		strings.NewReader(string(chatBody(msg, false))))
	if err != nil {
		return false, "", fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench-not-a-real-key")
	req.Header.Set("X-Memory-Mode", "on")
	req.Header.Set("X-Memory-User", user)
	req.Header.Set("X-Memory-Conversation", user)
	resp, err := client.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return false, "", fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get(fakeupstream.RecallHeader) == "true", resp.Header.Get(loadgen.DegradedHeader), nil
}

// storedTurns reads user's conversation back and returns the turn numbers
// of its user messages, in stored order.
func storedTurns(ctx context.Context, s *server, user string) ([]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.baseURL+"/memory/conversations/"+user+"?user="+user, nil)
	if err != nil {
		return nil, fmt.Errorf("conversation request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read conversation: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read conversation %s: status %d", user, resp.StatusCode)
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decode conversation: %w", err)
	}
	var ks []int
	for _, m := range body.Messages {
		tok, ok := strings.CutPrefix(m.Content, "note f")
		if m.Role != "user" || !ok {
			continue
		}
		tok, _, _ = strings.Cut(tok, " ")
		if len(tok) < 4 {
			continue
		}
		k, err := strconv.Atoi(tok[len(tok)-4:])
		if err != nil {
			continue
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// freshSection renders the read-your-writes checks.
func (r report) freshSection() string {
	if len(r.fresh) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Read-your-writes, order and drain\n\n"+
		"Each gateway with memory on: %d connections, each a new user with one conversation of %d turns, every turn sent "+
		"%v after the previous one's answer with only its newest message. *Read-your-writes* is the share of turns (all but "+
		"each conversation's first) whose prompt, as the fake upstream received it, held the turn before; *degraded* is the "+
		"share of those turns the gateway forwarded with a part of memory left out because it failed or did not load within "+
		"`memory.load_timeout` (`X-Memory-Degraded`): *history*, the conversation's recent turns (the `history` part, or all of "+
		"memory: `store`, `all`), which leaves the turn before out of the prompt, and *any* part (summary, facts, recall, "+
		"embedding too). Then, once the "+
		"stored backlog drained, every conversation is read back through the management API: turns *lost* (never stored), "+
		"*duplicated* (stored twice) and *out of order* (stored after a later turn of their conversation). Enrichment lag "+
		"is capture → after-save hooks done (fact extraction, summaries, indexing).\n\n",
		r.fresh[0].conns, r.fresh[0].turns, freshGap)
	b.WriteString("| gateway | turns | read-your-writes | degraded (history / any) | errors | backlog at load end | drained after | lost | duplicated | out of order | enrichment lag p50 ≤ | p99 ≤ |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, f := range r.fresh {
		c := f.capture
		drain := fmtDur(c.drain)
		if !c.drained {
			drain = "not within " + fmtDur(c.drain)
		}
		fmt.Fprintf(&b, "| %s | %d | **%.1f%%** (%d of %d) | %.1f%% / %.1f%% | %d | %.0f | %s | %d | %d | %d | %s | %s |\n",
			f.server, f.conns*f.turns, 100*f.rywShare(), f.hits, f.checked, 100*f.share(f.degradedHistory), 100*f.share(f.degradedAny), f.errors,
			c.backlog, drain, f.lost, f.duplicated, f.outOfOrder, fmtBound(c.lagP50), fmtBound(c.lagP99))
	}
	return b.String()
}
