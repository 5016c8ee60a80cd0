package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// The shared prints' operations: the op label of
// memgate_auxiliary_prints_failed_total (metrics.prints).
const (
	printsRead   = "read"
	printsWrite  = "write"
	printsForget = "forget"
)

// The shared new-chat signal's operations (the users seen resending their
// history): the op label of memgate_newchat_signal_failed_total
// (metrics.newChatSignal). A failed read of the signal is not one of
// them: it is memgate_memory_degraded_total{part="newchat"}.
const (
	newChatSignalWrite  = "write"
	newChatSignalForget = "forget"
)

// metrics are the proxy's collectors.
type metrics struct {
	breaker   *prometheus.GaugeVec
	degraded  *prometheus.CounterVec
	retries   prometheus.Counter
	captureDr *prometheus.CounterVec
	// tokensSent and tokensSaved account the prompts memory assembled.
	tokensSent, tokensSaved prometheus.Counter
	// prepare times the whole memory load and assembly of a request.
	prepare prometheus.Histogram
	// prefixRepeated counts the prompt tokens that repeat the previous
	// request's prefix; providerCached those the provider read from its
	// cache.
	prefixRepeated, providerCached prometheus.Counter
	// states counts the provider state checks and bindings by outcome.
	states *prometheus.CounterVec
	// auxiliary counts the requests about a conversation, by API.
	auxiliary *prometheus.CounterVec
	// prints counts the reads, writes and deletions of the prints the
	// gateway processes share that failed or were late, by op (printsRead
	// …).
	prints *prometheus.CounterVec
	// newChatSignal counts the writes and deletions of the users seen
	// resending their history that the gateway processes share (the
	// resenders' shared signal) that failed or were late, by op
	// (newChatSignalWrite …; a failed read is degraded "newchat").
	newChatSignal *prometheus.CounterVec
	// hangUpReading counts the upstreams read on after their client hung
	// up (readOn); hangUpReads how each such read ended, by outcome
	// (readOnCompleted …).
	hangUpReading prometheus.Gauge
	hangUpReads   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memgate_upstream_breaker_state", Help: "Circuit breaker state per upstream host and model, the most open of its tenants' breakers: 0 closed, 1 half-open, 2 open.",
		}, []string{"host", "model"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_memory_degraded_total", Help: "Memory-on chat requests that went upstream without a part of memory, by the part left out (failed or late): history, summary, facts, recall, embedding (recall fell back to full text), store (not connected), all, capture (the request resent more history than one request stores: its older messages went unstored), transcripts (the prints of the user's newest exchanges shared through Redis did not load: the request was checked for one about the chat against this process's own), or newchat (whether another process saw the user resend their history, shared through Redis, did not load: a request landed in the default conversation without earlier turns got its recent turns and summary, as a newest-only client's does).",
		}, []string{"part"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_upstream_retries_total", Help: "Upstream attempts retried (could not connect, or 502, 503, 504 before the body).",
		}),
		captureDr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_skipped_total", Help: "Completed exchanges not captured, by reason: unreadable reply, too_large (over the capture cap), overflow (the stream tee fell behind), background_lost (a background response's exchange, held by the process that forwarded it until a GET of the response returns it done, was evicted or expired before), shutdown (a stream a handler ended after the gateway stopped waiting for them at shutdown).",
		}, []string{"reason"}),
		tokensSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_sent_total", Help: "Prompt tokens sent upstream in requests whose messages memory assembled.",
		}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_saved_total", Help: "Sum over memory-assembled requests of max(0, tokens original - tokens sent): what the client's request plus its stored history would have cost beyond what was sent.",
		}),
		prefixRepeated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_prompt_prefix_repeated_tokens_total", Help: "Prompt tokens of memory-assembled requests that repeat, byte for byte from the start, the previous request's prompt of the same conversation (what a provider's prompt cache can serve), estimated as the repeated share of the body's bytes times the tokens sent.",
		}),
		providerCached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_provider_cached_tokens_total", Help: "Prompt tokens of captured memory-on exchanges that the provider reported reading from its prompt cache (usage.prompt_tokens_details.cached_tokens, input_tokens_details.cached_tokens, cache_read_input_tokens).",
		}),
		states: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_provider_states_total", Help: "With gateway keys and a shared upstream key: provider states (stored responses, their items, conversations) bound to the tenant's user whose request created them or named the state they belong to (bound), not bound (bind_failed: its owner cannot name it again), and requests refused for naming one not bound to their tenant and user (refused) or that the store could not check (unverifiable), and input item ids given beside the item's content that were not the caller's, dropped before forwarding (id_dropped).",
		}, []string{"outcome"}),
		auxiliary: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_auxiliary_requests_total", Help: "Memory-on requests answered without memory and not captured because they are about the conversation (one user message quoting the user's newest exchange, both roles: an app's title, tags or follow-up request), by API.",
		}, []string{"api"}),
		prints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_auxiliary_prints_failed_total", Help: "Reads (read: the request was checked against this process's own prints only), writes (write: other processes will not tell the exchange's requests about the chat) and erasures (forget) of the prints of users' newest exchanges that the gateway processes share through Redis, that failed or were late.",
		}, []string{"op"}),
		newChatSignal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_newchat_signal_failed_total", Help: "Writes (write: other processes will not take the user's new chats for new chats until one sees them resend) and erasures (forget: the signal expires on its own) of the users seen resending their history that the gateway processes share through Redis, that failed or were late. A failed read is memgate_memory_degraded_total{part=\"newchat\"}.",
		}, []string{"op"}),
		prepare: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "memgate_memory_load_seconds", Help: "Time to load a memory-on chat request's memory and assemble its prompt.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .15, .2, .25, .3, .4, .5, 1, 2.5},
		}),
	}
	// Every part is exported from the start, at 0.
	for _, part := range []string{memory.DegradedHistory, memory.DegradedSummary, memory.DegradedFacts,
		memory.DegradedRecall, memory.DegradedEmbedding, memory.DegradedStore, memory.DegradedAll, memory.DegradedCapture, memory.DegradedTranscripts, memory.DegradedNewChat} {
		m.degraded.WithLabelValues(part)
	}
	for _, api := range []string{"chat", "messages", "responses"} {
		m.auxiliary.WithLabelValues(api)
	}
	for _, op := range []string{printsRead, printsWrite, printsForget} {
		m.prints.WithLabelValues(op)
	}
	for _, op := range []string{newChatSignalWrite, newChatSignalForget} {
		m.newChatSignal.WithLabelValues(op)
	}
	m.hangUpReading = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "memgate_hangup_reads_in_flight", Help: "Upstream streams read on after their client hung up with a whole answer, for the exchange's end.",
	})
	m.hangUpReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memgate_hangup_reads_total", Help: "Upstream streams read on after their client hung up, by how the read ended: completed (the terminal event came, the exchange stored as the upstream ended it), timeout, broken (the upstream broke off, or the capture cap), shutdown.",
	}, []string{"outcome"})
	for _, o := range []string{readOnCompleted, readOnTimeout, readOnBroken, readOnShutdown} {
		m.hangUpReads.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.breaker, m.degraded, m.retries, m.captureDr, m.tokensSent, m.tokensSaved, m.prepare, m.prefixRepeated, m.providerCached, m.states, m.auxiliary, m.prints, m.newChatSignal, m.hangUpReading, m.hangUpReads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
