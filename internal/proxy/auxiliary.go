package proxy

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// auxCheck is the check of whether a memory-on request is about its
// conversation rather than a turn of it (Proxy.auxiliary), and what the
// request made of its answer. The answer may wait on the read of the
// prints the gateway processes share: the request's memory loads
// meanwhile, as a turn's would, and take waits for it before the request
// is forwarded with that memory or captured.
type auxCheck struct {
	p   *Proxy
	q   *quoteCheck
	h   http.Header
	x   *server.Exchange
	api string
	// taken: take applied the answer, aux and err.
	taken bool
	aux   bool
	err   error
}

// auxiliary starts the check of whether a memory-on request of a user,
// whose key in the prints of exchanges is k, is a request about the
// user's conversation rather than a turn of it: its only message (system
// ones aside) is a user message, or its last system one when it has no
// other (see onlyUserMessage), quoting one of the user's newest
// captured exchanges, both the user's words and the reply, in order, and
// ending with the reply but for a label, or, for a user seen resending
// their history (resenders), with the app's words after the transcript
// (see transcripts, wordSeq.quotes). Its answer is
// applied to the response's headers h and the exchange x of the request
// to the API api (auxCheck.take). Off without Options.SkipTranscripts.
func (p *Proxy) auxiliary(ctx context.Context, k prefixKey, id memory.Identity, mode memory.Mode, msgs []memory.Message, h http.Header, x *server.Exchange, api string) *auxCheck {
	c := &auxCheck{p: p, q: &quoteCheck{}, h: h, x: x, api: api}
	if p.transcripts == nil || id.User == "" || mode == memory.ModeOff {
		return c
	}
	if text, ok := onlyUserMessage(msgs); ok {
		c.q = p.transcripts.check(ctx, k, text, p.resenders.resends(id.Tenant, id.User))
	}
	return c
}

// ready reports whether the answer has come: take will not wait.
func (c *auxCheck) ready() bool { return c.q.ready() }

// take waits for the answer and applies it, once (later calls return it
// at once): a shared read that failed or was late is counted and logged
// (the answer is this process's prints' alone; readErr); a request about
// the conversation is marked X-Memory-Auxiliary: transcript and counted,
// and take reports true: the request goes upstream as sent, memory off,
// and nothing of it is captured.
func (c *auxCheck) take(ctx context.Context) bool {
	if c.taken {
		return c.aux
	}
	c.taken = true
	c.aux, c.err = c.q.wait()
	if c.err != nil {
		c.p.m.prints.WithLabelValues(printsRead).Inc()
		c.p.log.LogAttrs(ctx, slog.LevelDebug, "shared prints unavailable; checked against this process's own",
			slog.String("request_id", c.x.ID()), slog.String("error", c.err.Error()))
	}
	if c.aux {
		// A request about the conversation (a title, tags, follow-up
		// questions over a transcript of it): answered as sent, not a
		// turn of it.
		c.h["X-Memory-Auxiliary"] = []string{"transcript"}
		c.p.m.auxiliary.WithLabelValues(c.api).Inc()
	}
	return c.aux
}

// readErr is the shared read's error once take has applied the answer
// (nil before): the request is marked X-Memory-Degraded: transcripts.
func (c *auxCheck) readErr() error { return c.err }
