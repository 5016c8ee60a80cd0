package proxy

import (
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/proxy/upstream"
)

// Options are the proxy's settings.
type Options struct {
	// Upstream is the API forwarded to, its timeouts, retries and breaker.
	Upstream Upstream
	// MaxBodyBytes caps a chat request body (413 beyond).
	MaxBodyBytes int64
	// LoadTimeout bounds the Preparer; past it the request goes upstream
	// without memory.
	LoadTimeout time.Duration
	// Passthrough lists the routes ("METHOD /path", a trailing * matching
	// any rest) forwarded when gateway keys are configured, besides the
	// three served with memory; nil or empty allows none (the
	// configuration's default lists the stateless ones).
	Passthrough []string
	// PrivateModels lists the operator's own models (fine-tuned ones,
	// those its organization or a user of it owns) that GET /v1/models
	// lists and GET /v1/models/{id} finds when the operator's key goes
	// upstream (an entry ending in * matches any rest); the others are
	// left out (see models.go). nil: none.
	PrivateModels []string
	// WrapTransport, when set, wraps the upstream transport under the
	// retries, breakers and idle timeout: each attempt goes through it
	// (tracing instruments the upstream calls so).
	WrapTransport func(http.RoundTripper) http.RoundTripper

	// CacheBreakpoints adds Anthropic cache_control breakpoints after the
	// stable part of memory-on /v1/messages prompts; the
	// X-Memory-Cache-Breakpoints header (on, off) overrides it per request.
	CacheBreakpoints bool
	// MaxHistory bounds the resent history one exchange stores: its first
	// memory.BranchHead messages and its MaxHistory newest
	// (memory.CutRequest; 0: no bound). The proxy cuts each request once
	// and hands the cut to routing and capture; a request resending more
	// is answered with X-Memory-Degraded naming memory.DegradedCapture.
	MaxHistory int
	// SkipTranscripts answers a request about a conversation (an app's
	// title, tags or follow-up request quoting the user's newest exchange,
	// both roles, and ending with its reply: see transcripts) without
	// memory and captures nothing of it (X-Memory-Auxiliary: transcript).
	SkipTranscripts bool
	// PrintsTimeout bounds each read and write of the prints the gateway
	// processes share (Deps.Prints); a read past it leaves the check to
	// this process's own prints (X-Memory-Degraded: transcripts). 0: 150ms.
	PrintsTimeout time.Duration
	// HangUpReadOn bounds how long the upstream of a memory-on stream is
	// read on after its client hung up once the stream had shown a whole
	// answer, for the stream's end, so that the exchange is stored as the
	// upstream finished it (see hangup.go). 0: 30s.
	HangUpReadOn time.Duration
	// StateRetention is how long a provider state (a stored response, a
	// conversation) stays bound to the tenant's user that created it, when
	// every tenant reaches the provider with the operator's key; past it,
	// a request naming it is answered as naming an unknown one.
	StateRetention time.Duration
}

// Upstream is the API forwarded to: where, with which key, and how
// patiently (upstream.* in the configuration; the wiring passes its
// defaults).
type Upstream struct {
	// BaseURL is the OpenAI-compatible API root, including /v1.
	BaseURL string
	// APIKey replaces the client's Authorization when set; the provider's
	// answers are then scrubbed of the operator's account (see scrub).
	APIKey string
	// ConnectTimeout bounds dialing the upstream and the TLS handshake.
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the wait for the upstream's response head.
	FirstByteTimeout time.Duration
	// IdleStreamTimeout aborts a stream that sends nothing for this long.
	IdleStreamTimeout time.Duration
	// MaxIdleConns is the size of the keep-alive pool per upstream host.
	MaxIdleConns int
	// Retries is how many times a request that never reached the upstream,
	// or got 502, 503 or 504 before any body byte, is retried (none for a
	// request an SDK marks as its retry; see retryTransport).
	Retries int
	// RetryBaseDelay is the first backoff; it doubles per attempt, with jitter.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps one backoff, including a Retry-After.
	RetryMaxDelay time.Duration
	// Breaker configures the circuit breakers, one per upstream host,
	// tenant and model.
	Breaker Breaker
	// Anthropic is where the /v1/messages routes go; the settings above
	// apply to it too.
	Anthropic Anthropic
}

// transport is the upstream transport's part of u.
func (u Upstream) transport() upstream.Options {
	return upstream.Options{ConnectTimeout: u.ConnectTimeout, FirstByteTimeout: u.FirstByteTimeout, MaxIdleConns: u.MaxIdleConns}
}

// Anthropic is the Anthropic upstream.
type Anthropic struct {
	// BaseURL is the Anthropic API root, including /v1.
	BaseURL string
	// APIKey, when set, is sent as x-api-key in place of the client's
	// x-api-key and Authorization (and the answers scrubbed, see scrub).
	APIKey string
}

// Breaker configures a circuit breaker.
type Breaker struct {
	// ConsecutiveFailures opens the breaker.
	ConsecutiveFailures int
	// OpenTimeout is how long the breaker stays open before letting probes
	// through.
	OpenTimeout time.Duration
	// HalfOpenRequests is how many probe requests are let through when
	// half-open.
	HalfOpenRequests int
}
