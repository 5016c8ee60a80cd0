package inject

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// loaded is the memory one request may draw on.
type loaded struct {
	summary *memory.Summary
	stored  []memory.Message // newest stored messages, oldest first
	facts   []memory.Fact    // current facts, pinned ones included, best first
	items   []memory.Item    // recalled passages, best first
	now     time.Time
}

// load fetches the summary, the stored history (for a client that sends only
// its newest turn, unless req.NoRecent) and the facts and recalled passages concurrently, under
// ctx. The first error is returned, wrapped.
func (a *Assembler) load(ctx context.Context, req memory.Request, rest []memory.Message, fullHistory bool) (loaded, error) {
	ld := loaded{now: a.opts.Now()}
	conv := req.Conversation != ""
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	run := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("load %s: %w", what, err))
				mu.Unlock()
			}
		}()
	}
	if conv && a.deps.Summaries != nil {
		run("summary", func() error {
			s, err := a.deps.Summaries.LatestSummary(ctx, req.Identity)
			if errors.Is(err, memory.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			ld.summary = &s
			return nil
		})
	}
	if conv && !fullHistory && !req.NoRecent && a.opts.RecentMessages > 0 {
		run("recent history", func() error {
			msgs, err := a.deps.History.Recent(ctx, req.Identity, a.opts.RecentMessages)
			ld.stored = msgs
			return err
		})
	}
	switch {
	case a.deps.Recaller != nil:
		run("recall", func() error {
			r, err := a.deps.Recaller.Recall(ctx, memory.RecallQuery{
				Identity:          req.Identity,
				Text:              recallText(rest),
				CrossConversation: req.CrossConversation,
				Now:               ld.now,
			})
			ld.facts, ld.items = r.Facts, r.Items
			return err
		})
	case a.deps.Facts != nil:
		run("facts", func() error {
			fs, err := a.deps.Facts.Facts(ctx, req.Tenant, req.User, ld.now, false)
			for _, f := range fs {
				if f.Pinned && f.Current(ld.now) {
					ld.facts = append(ld.facts, f)
				}
			}
			return err
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return loaded{}, errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return loaded{}, fmt.Errorf("load memory: %w", err)
	}
	return ld, nil
}

// shortQuery is the length (in bytes) under which a user message is joined
// with the assistant turn before it to make a recall query ("yes, do that").
const shortQuery = 40

// recallText is the recall query for a client's messages: the newest user
// message, preceded by the assistant message before it when it is short.
func recallText(msgs []memory.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		text := msgs[i].Content
		if len(strings.TrimSpace(text)) < shortQuery {
			for j := i - 1; j >= 0; j-- {
				if msgs[j].Role == "assistant" && msgs[j].Content != "" {
					text = msgs[j].Content + "\n" + text
					break
				}
			}
		}
		return text
	}
	return ""
}
