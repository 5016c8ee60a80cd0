// Package config defines memgate's configuration: defaults, then a strictly
// decoded YAML file, then GATEWAY_* environment overrides, then validation.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole gateway configuration. Every field has a default set by
// Default; config.yaml at the repository root documents each key.
type Config struct {
	// Listen is the HTTP listen address (GATEWAY_LISTEN). Empty (the
	// default) is DefaultListen, loopback only, or DefaultListenKeyed when
	// gateway keys are configured; Load resolves it.
	Listen string `yaml:"listen"`
	// LogLevel is debug, info, warn or error (GATEWAY_LOG_LEVEL).
	LogLevel string `yaml:"log_level"`
	// MaxBodyBytes caps a request body; larger bodies get 413
	// (GATEWAY_MAX_BODY_BYTES). Default 2 MiB: room for half a million
	// tokens of text (more than any model's window) or a resized image,
	// while memory's work on one request, linear in its size, stays a few
	// CPU-seconds at most (issue 24: at 8 MiB a few requests could hold a
	// gateway's cores).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ShutdownGrace is how long in-flight requests and streams may run after
	// SIGTERM before they are cancelled.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// Upstream is the OpenAI-compatible API memgate forwards to.
	Upstream Upstream `yaml:"upstream"`
	// ContextWindows maps model names (or prefixes) to their context window in
	// tokens, overriding and extending the built-in table.
	ContextWindows map[string]int `yaml:"context_windows"`
	// Store selects and configures the memory store.
	Store Store `yaml:"store"`
	// Capture configures how exchanges are persisted.
	Capture Capture `yaml:"capture"`
	// Memory configures what is injected into upstream requests.
	Memory Memory `yaml:"memory"`
	// Compaction configures rolling summaries.
	Compaction Compaction `yaml:"compaction"`
	// Recall configures embeddings, search and facts about users.
	Recall Recall `yaml:"recall"`
	// Keys are the gateway API keys. When any is configured, every request
	// must present one as "Authorization: Bearer <key>".
	Keys []Key `yaml:"keys"`
	// AdminKey opens the management API and the web inspector for every tenant (GATEWAY_ADMIN_KEY):
	// the key itself or "sha256:<hex>" of it. With neither it nor Keys
	// configured, the management API and the web inspector (/ui) answer
	// loopback clients only.
	AdminKey string `yaml:"admin_key"`
	// Security configures what browsers, tenants and failing clients may
	// reach.
	Security Security `yaml:"security"`
}

// Security configures the gateway's edge: which names and pages may reach
// routes no key protects, which provider routes tenants may reach, how fast
// a client may try keys, and how long an inspector session lives.
type Security struct {
	// AllowedHosts are the Host names (besides the listen host, loopback
	// names and IP literals) under which the routes no key protects answer;
	// ".example.com" allows every name under example.com.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the web origins ("https://app.example.com") whose
	// pages may call the routes no key protects.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MetricsKey opens /metrics (GATEWAY_METRICS_KEY): the key itself or
	// "sha256:<hex>" of it, sent as "Authorization: Bearer <key>". With
	// any key configured (gateway keys, admin_key or this one), /metrics
	// answers only this key and the admin key, since its series name the
	// models every tenant asks for; with none, it answers under the names
	// the browser guard allows.
	MetricsKey string `yaml:"metrics_key"`
	// Passthrough lists the provider routes, beyond the three memgate serves
	// with memory, that a gateway key may reach ("METHOD /path", a trailing
	// "*" matching any rest). Every other route is refused with gateway keys
	// configured, since it would act with the operator's provider key on
	// data every tenant shares (stored completions, files, batches).
	Passthrough []string `yaml:"passthrough"`
	// PrivateModels lists the operator's own models that tenants may see
	// when upstream.api_key replaces the client's key: fine-tuned models
	// ("ft:…", whose ids name the operator's organization) and models its
	// organization or a user of it owns are left out of GET /v1/models,
	// and GET /v1/models/{id} of one answers 404 model_not_found, unless
	// listed here ("ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF"; a
	// trailing "*" matches any rest; "*" lists them all). Default none.
	PrivateModels []string `yaml:"private_models"`
	// ProviderStateRetention is how long a provider state a tenant's user
	// created (a stored response, a conversation of the Conversations
	// API) stays theirs to name again, when gateway keys are configured
	// and upstream.api_key replaces the client's key: memgate records
	// whose each one is and refuses it to every other tenant and user.
	// Providers keep stored responses about 30 days; past the retention
	// the state reads as unknown.
	ProviderStateRetention Duration `yaml:"provider_state_retention"`
	// FailedAuthBurst is how many refused keys or logins a client (an IP
	// address, an IPv6 /64) may make before it must wait; 0 disables the
	// limit.
	FailedAuthBurst int `yaml:"failed_auth_burst"`
	// FailedAuthRefill gives a client one more attempt per this long.
	FailedAuthRefill Duration `yaml:"failed_auth_refill"`
	// SessionIdle ends an inspector session unused for this long.
	SessionIdle Duration `yaml:"session_idle"`
	// SessionMaxAge ends an inspector session this long after login,
	// however much it is used.
	SessionMaxAge Duration `yaml:"session_max_age"`
}

// DefaultPassthrough are the provider routes a gateway key reaches by
// default: stateless ones that read or write no data stored at the
// provider.
var DefaultPassthrough = []string{
	"POST /v1/embeddings",
	"GET /v1/models",
	"GET /v1/models/*",
	"POST /v1/messages/count_tokens",
}

// DefaultProviderStateRetention is security.provider_state_retention's
// default: the 30 days providers keep a stored response.
const DefaultProviderStateRetention = 30 * 24 * time.Hour

// MaxRetryFor bounds capture.retry_for: a turn retried in place longer
// than a tombstone of a conversation never stored lives (7 days,
// memory.UnstoredTombstoneLife) could be stored after it went.
const MaxRetryFor = Duration(24 * time.Hour)

// DefaultListen and DefaultListenKeyed are where the gateway listens when
// no listen address is configured: loopback only, unless gateway keys
// protect it.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultListenKeyed = ":8080"
)

// Upstream configures the upstream client.
type Upstream struct {
	// BaseURL is the upstream API root, including /v1 (GATEWAY_UPSTREAM_BASE_URL).
	BaseURL string `yaml:"base_url"`
	// APIKey replaces the client's Authorization when set
	// (GATEWAY_UPSTREAM_API_KEY); the provider's answers are then scrubbed
	// of the operator's account (organization and project ids, key
	// fragments; a 401 or 403 becomes a 502).
	APIKey string `yaml:"api_key"`
	// ConnectTimeout bounds dialing the upstream.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// FirstByteTimeout bounds the wait for the upstream's response headers
	// (of a non-streamed reply, the whole answer). The default, 10 minutes,
	// is the official SDKs' own timeout: a reasoning model may take minutes.
	FirstByteTimeout Duration `yaml:"first_byte_timeout"`
	// IdleStreamTimeout aborts a stream that sends nothing for this long
	// (10 minutes by default: OpenAI's chat streams send nothing while a
	// reasoning model thinks).
	IdleStreamTimeout Duration `yaml:"idle_stream_timeout"`
	// MaxIdleConns is the size of the keep-alive pool per upstream host; size
	// it to the gateway's concurrency.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// Retries is how many times a request is retried when it could not
	// connect (it never reached the upstream) or the upstream answered 502,
	// 503 or 504 before any body byte; a 429 is passed to the client. A
	// request an SDK marks as its own retry (X-Stainless-Retry-Count above
	// 0) is not retried, and an answer that still failed after these
	// retries carries X-Should-Retry: false, so the SDK's retries and these
	// do not multiply.
	Retries int `yaml:"retries"`
	// RetryBaseDelay is the first backoff; it doubles per attempt, with jitter.
	RetryBaseDelay Duration `yaml:"retry_base_delay"`
	// RetryMaxDelay caps one backoff, including a Retry-After the upstream asks for.
	RetryMaxDelay Duration `yaml:"retry_max_delay"`
	// Breaker configures the circuit breakers in front of the upstream, one
	// per upstream host and model.
	Breaker Breaker `yaml:"breaker"`
	// Anthropic is where POST /v1/messages (the Anthropic Messages API) and
	// the other /v1/messages routes go; the timeouts, retries and breakers
	// above apply to it too.
	Anthropic Anthropic `yaml:"anthropic"`
}

// Anthropic configures the Anthropic upstream.
type Anthropic struct {
	// BaseURL is the Anthropic API root, including /v1
	// (GATEWAY_ANTHROPIC_BASE_URL).
	BaseURL string `yaml:"base_url"`
	// APIKey, when set, is sent upstream as x-api-key in place of the
	// client's x-api-key and Authorization (GATEWAY_ANTHROPIC_API_KEY); the
	// provider's answers are then scrubbed as for Upstream.APIKey.
	APIKey string `yaml:"api_key"`
}

// Breaker configures a circuit breaker.
type Breaker struct {
	// ConsecutiveFailures is how many consecutive failed attempts open the
	// breaker; each retry is an attempt of its own (a client call is up to
	// 1 + Upstream.Retries attempts).
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// OpenTimeout is how long the breaker stays open before letting probes through.
	OpenTimeout Duration `yaml:"open_timeout"`
	// HalfOpenRequests is how many probe requests are let through when half-open.
	HalfOpenRequests int `yaml:"half_open_requests"`
}

// Store selects the memory store.
type Store struct {
	// Driver is sqlite (embedded default) or postgres (GATEWAY_STORE).
	Driver string `yaml:"driver"`
	// SQLitePath is the database file for the sqlite driver (GATEWAY_SQLITE_PATH).
	SQLitePath string `yaml:"sqlite_path"`
	// PostgresURL is the PostgreSQL connection string (GATEWAY_POSTGRES_URL).
	PostgresURL string `yaml:"postgres_url"`
	// RedisURL is the Redis URL (GATEWAY_REDIS_URL) for the capture and
	// enrichment queues in postgres mode, the erasure notices and what the
	// gateway processes share (the prints of users' newest exchanges, the
	// users seen resending their history); empty disables Redis.
	RedisURL string `yaml:"redis_url"`
	// RedisPrefix starts every Redis key memgate uses, so several deployments
	// can share one Redis.
	RedisPrefix string `yaml:"redis_prefix"`
}

// Capture configures exchange persistence.
type Capture struct {
	// Worker runs the capture queue consumers inside `gateway serve`.
	Worker bool `yaml:"worker"`
	// Redact replaces secrets (API keys, tokens, private keys, card numbers)
	// with typed placeholders before anything is stored.
	Redact bool `yaml:"redact"`
	// RedactPatterns are extra regular expressions to redact, by placeholder name.
	RedactPatterns map[string]string `yaml:"redact_patterns"`
	// ReclaimAfter is how long a claimed capture may stay unacknowledged
	// (its worker crashed, or the store was down) before another worker
	// takes it over and retries it.
	ReclaimAfter Duration `yaml:"reclaim_after"`
	// EnrichInterval is the least time between the starts of two
	// enrichment rounds (indexing, facts, compaction; default 250ms): under
	// steady load a round gathers the turns of that stretch.
	EnrichInterval Duration `yaml:"enrich_interval"`
	// RetryFor bounds how long a turn that can be neither stored nor
	// queued (PostgreSQL without Redis, or the queue failing too) is
	// retried in place before it is set aside as a dead letter (default
	// 2m, at most MaxRetryFor); a chat turn whose chat's lock another
	// store holds waits for it past retry_for, up to a day.
	RetryFor Duration `yaml:"retry_for"`
	// LockStuckAfter is how long a queued chat turn may wait for its
	// chat's lock (not taken, or lost before each save) before the
	// capture worker reports it stuck: logged at error once, counted
	// (failures{stage="chat_lock_stuck"}) and shown by the gauge
	// memgate_capture_worker_lock_stuck until it is stored (default 5m,
	// five chat lock leases; record.WorkerOptions.LockStuckAfter). The
	// turn is kept and retried all the same: a lock that never holds is
	// a deployment to fix, not a turn to drop.
	LockStuckAfter Duration `yaml:"lock_stuck_after"`
	// ImportMaxMessages is the most messages one POST /v1/memory/import may
	// hold (larger batches get 400: split them, oldest first).
	ImportMaxMessages int `yaml:"import_max_messages"`
	// MaxHistoryMessages bounds the history one chat request stores: of
	// the earlier messages a client resends, the first 256 and the newest
	// MaxHistoryMessages are stored (aligned with what the conversation
	// holds, so only what is new is stored), the messages between are not
	// (X-Memory-Degraded: capture). A client that resends its whole
	// history stores its new turn each time, however long the chat; an
	// edit it makes among the messages between supersedes the stored copy
	// and what follows it, as an edit among the newest does. A current
	// turn longer than that (user or tool messages in a row, no reply
	// among them) is stored the same way: its first 256 and newest
	// MaxHistoryMessages messages.
	MaxHistoryMessages int `yaml:"max_history_messages"`
	// SkipTranscripts treats a request about a conversation as what it is
	// (default true): an app's title, tags or follow-up request, one user
	// message quoting the user's newest exchange, both the user's words
	// and the reply, in order, within minutes of it, and ending with the
	// reply but for at most 2 words, is answered without memory and not
	// stored (X-Memory-Auxiliary: transcript). A pasted-history app's
	// turn, going on with the user's new words, is stored, unless those
	// and its labels are 2 words or fewer. With store.redis_url the
	// gateway processes share the hashes this is told by (read within
	// memory.load_timeout), so a request that reaches another process
	// than its chat's turns is told too.
	SkipTranscripts bool `yaml:"skip_transcripts"`
}

// Memory configures memory injection.
type Memory struct {
	// RecentMessages bounds how many stored messages are prepended to a request
	// that carries only new messages.
	RecentMessages int `yaml:"recent_messages"`
	// LoadTimeout is the deadline for loading each stored part of memory and
	// recall's store queries; a part not back by then is left out and named
	// in X-Memory-Degraded.
	LoadTimeout Duration `yaml:"load_timeout"`
	// EmbeddingTimeout is how long recall waits for its query's embedding
	// (from a remote provider, or for a free slot of the built-in encoder)
	// before it searches with full text alone
	// (X-Memory-Degraded: embedding); the call goes on and caches the vector.
	EmbeddingTimeout Duration `yaml:"embedding_timeout"`
	// MaxContextTokens caps the prompt memgate assembles; the budget is the
	// smaller of this and the model's window minus the completion reserve.
	MaxContextTokens int `yaml:"max_context_tokens"`
	// CompletionReserve is kept free for the reply when the request sets
	// neither max_tokens nor max_completion_tokens.
	CompletionReserve int `yaml:"completion_reserve"`
	// Shares are the most each memory part may take of the budget; what a
	// part leaves unused flows to the recent turns.
	Shares Shares `yaml:"shares"`
	// Template is the memory block's Go text/template; empty uses the
	// built-in one. It must enclose each block it renders in one tag
	// pair, <name>…</name>, which stored text is quoted not to write: the
	// gateway refuses to start with one that delimits the block otherwise.
	Template string `yaml:"template"`
	// Position is the role memory is sent in: "system" (system messages,
	// the Anthropic system prompt, the Responses instructions, with what a
	// request recalled right before its question) or "user" (user-role
	// messages at the same places: no stored text in system role).
	Position string `yaml:"position"`
	// CacheBreakpoints adds Anthropic cache_control breakpoints on
	// /v1/messages after the stable part of the prompt (the stable memory
	// block, and the end of the recent turns), within what the app's own
	// breakpoints leave of the API's four; X-Memory-Cache-Breakpoints: on
	// or off overrides it per request.
	CacheBreakpoints bool `yaml:"cache_breakpoints"`
	// FillRecall gives the tokens a prompt leaves unused (the recent
	// turns' window moves in steps and stops short of the room, or every
	// recent turn fits) to more recalled passages. On by default: on
	// LoCoMo it is worth 0.2 of coverage. Off, recall keeps to its share:
	// the recalled block, the part of the prompt a provider's prompt cache
	// cannot serve, and the prompt are shorter, at the cost of recall.
	FillRecall bool `yaml:"fill_recall"`
	// KeepRecall renders each past user turn with the recalled block it
	// was sent with, in place, so that what a request recalled is part of
	// the next request's repeated prefix (a provider's prompt cache serves
	// it); the current question's recall shows only passages not already
	// in those blocks. The blocks are kept in each gateway process: after a
	// restart or on another gateway, turns render without them. Off by
	// default (issue 28).
	KeepRecall bool `yaml:"keep_recall"`
	// KeepRecallResent is keep_recall for a client that resends its whole
	// history (a full-history chat): each resent user turn is rendered
	// with the recalled block it was sent with, so a turn that recalled
	// leaves its block in place for the turns after it and their prompts
	// repeat it (a provider's prompt cache serves it); when the turns and
	// blocks outgrow the recent turns' window, blocks leave first, oldest
	// first and several at once. The block a turn keeps is filled to the
	// window's low watermark; what the room holds beyond it goes to a
	// second block shown with that turn only, so a question asked in the
	// chat recalls as much as without the option. On by default (issue
	// 28; BENCHMARKS.md, session 13).
	KeepRecallResent bool `yaml:"keep_recall_resent"`
	// FillRecallWhen is which turns fill_recall fills on: "always" or
	// "asked" (the default: a turn with a question mark or that opens with
	// an interrogative, English or Portuguese, unless its question is put
	// to the assistant alone: "you" without "I", "my", "we" or a word of
	// the past, as in "What about you?"); a turn that asks nothing
	// then keeps its passages to shares.statement_recall (0: none), so its prompt's
	// volatile end is small and a provider's prompt cache serves the rest
	// (issue 28).
	FillRecallWhen string `yaml:"fill_recall_when"`
	// HoldSummary shows a conversation (of a client that sends only its
	// newest turn) the summary its previous turn was shown, with every
	// turn after it verbatim, until those turns outgrow the recent turns'
	// window; then the newest summary. A new summary version changes the
	// stable block, and every byte of the prompt after it: held, it does
	// so once per window instead of once per compaction (issue 28). Each
	// request then loads up to twice compaction's max_messages plus
	// keep_messages stored messages. The summaries are held in the
	// gateway process; after a restart the newest is shown. On by default.
	HoldSummary bool `yaml:"hold_summary"`
	// StableFacts keeps the stable memory block's facts the same from turn
	// to turn: pinned facts and facts learnt from turns already
	// summarised (or said in other conversations), newest first, not
	// ranked for the turn; facts learnt from the turns the prompt shows
	// verbatim go with the recalled block. On by default; off, the block
	// shows the facts most relevant to the turn and changes with every
	// turn (issue 28).
	StableFacts bool `yaml:"stable_facts"`
	// Cache bounds what each gateway process keeps in memory to answer
	// recall (both stores).
	Cache Cache `yaml:"cache"`
}

// Cache bounds, in MiB over all users, the in-memory recall caches of one
// gateway process (least recently searched users evicted first). A user
// whose vectors or full-text index exceed a quarter of theirs is searched
// in SQL instead; a gateway whose active users outgrow the items or turns
// reads them from the store on every search.
type Cache struct {
	// VectorsMB bounds the recall items' vectors (128: about 63,000 items
	// of the encoder's 512 dimensions, 83,000 of 384).
	VectorsMB int `yaml:"vectors_mb"`
	// TextsMB bounds the BM25 full-text indexes.
	TextsMB int `yaml:"texts_mb"`
	// ItemsMB bounds the whole items searches return (32: about 15,000 of
	// 512 dimensions, 20,000 of 384).
	ItemsMB int `yaml:"items_mb"`
	// TurnsMB bounds the turns around recalled messages.
	TurnsMB int `yaml:"turns_mb"`
	// RecentMB bounds the conversations' newest messages the engine keeps
	// for their recent turns, for either store (8: about 25,000 messages,
	// up to 64 per conversation).
	RecentMB int `yaml:"recent_mb"`
}

// Shares are fractions of the budget, each in [0, 1], summing to at most 1.
type Shares struct {
	// Summary is the rolling summary's share.
	Summary float64 `yaml:"summary"`
	// ExtractiveSummary caps, within Summary, a summary the extractive
	// summariser wrote (no side-model key, or its fallback): sentences
	// picked from the conversation, no model. What it leaves goes to the
	// passages. Default 0: on LoCoMo the passages covered more with those
	// tokens (BENCHMARKS.md, issue 27).
	ExtractiveSummary float64 `yaml:"extractive_summary"`
	// Pinned is the pinned facts' share: beyond it, the pins most relevant
	// to the current turn, then the most recent, are shown; the others
	// stay stored and come as facts when recall ranks them for a turn.
	Pinned float64 `yaml:"pinned"`
	// Facts is the other facts' share.
	Facts float64 `yaml:"facts"`
	// Recall is the recalled passages' share.
	Recall float64 `yaml:"recall"`
	// StatementRecall, with fill_recall_when "asked", bounds the passages
	// of a turn that asks nothing (0, the default: none; issue 28,
	// session 11: on LoCoMo, 0.02 cost 0.08 of the newest client's prefix
	// share and 0.12 of the full client's, and nothing of coverage, which
	// is measured at questions); never above recall. It is
	// not part of the sum: it bounds what recall's share may take.
	StatementRecall float64 `yaml:"statement_recall"`
}

// Total is the sum of the shares: what the memory block may take at most
// before what a part leaves unused flows to the others.
func (sh Shares) Total() float64 { return sh.Summary + sh.Pinned + sh.Facts + sh.Recall }

// Compaction configures rolling summaries.
type Compaction struct {
	// Enabled runs compaction after captures.
	Enabled bool `yaml:"enabled"`
	// BaseURL is the summariser's OpenAI-compatible API root; empty uses
	// upstream.base_url.
	BaseURL string `yaml:"base_url"`
	// APIKey for the summariser; empty uses upstream.api_key.
	APIKey string `yaml:"api_key"`
	// Model is the summariser model.
	Model string `yaml:"model"`
	// MaxSummaryTokens bounds one summary.
	MaxSummaryTokens int `yaml:"max_summary_tokens"`
	// HighWatermark: unsummarised history above this fraction of the recent
	// share triggers compaction...
	HighWatermark float64 `yaml:"high_watermark"`
	// LowWatermark: ...down to this fraction.
	LowWatermark float64 `yaml:"low_watermark"`
	// MaxMessages: more unsummarised non-system messages than this also
	// triggers compaction, keeping KeepMessages verbatim.
	MaxMessages int `yaml:"max_messages"`
	// KeepMessages stay verbatim after a count-triggered compaction.
	KeepMessages int `yaml:"keep_messages"`
	// FallbackAfter consecutive summariser failures switch a conversation to
	// the extractive (no-LLM) summariser.
	FallbackAfter int `yaml:"fallback_after"`
	// Timeout bounds one summariser call.
	Timeout Duration `yaml:"timeout"`
}

// Recall configures embeddings, search and facts.
type Recall struct {
	// Enabled turns recall (indexing, search, facts about users) on.
	Enabled bool `yaml:"enabled"`
	// CrossConversation searches the user's other conversations too
	// (X-Memory-Cross: off disables it per request).
	CrossConversation bool `yaml:"cross_conversation"`
	// TopK is how many passages /v1/memory/search returns by default; the
	// prompt's passages are chosen by the recall budget, not by TopK.
	TopK int `yaml:"top_k"`
	// MinSimilarity drops vector matches below this cosine similarity.
	MinSimilarity float64 `yaml:"min_similarity"`
	// RecencyHalfLife halves a passage's score per this much age; 0 (the
	// default) disables it, so old evidence competes on relevance alone (a
	// newer passage still wins a tie, and a query's own time words, "last
	// week" or "recently", steer recall toward when it points).
	RecencyHalfLife Duration `yaml:"recency_half_life"`
	// FactsMaxStored caps the current facts kept per user.
	FactsMaxStored int `yaml:"facts_max_stored"`
	// FactsMaxInjected caps the facts put in one prompt.
	FactsMaxInjected int `yaml:"facts_max_injected"`
	// FactTTL gives facts of a type an expiry, e.g. {event: 720h}.
	FactTTL map[string]Duration `yaml:"fact_ttl"`
	// Extraction configures model-based fact extraction.
	Extraction Extraction `yaml:"extraction"`
	// Embeddings configures the embedder.
	Embeddings Embeddings `yaml:"embeddings"`
}

// Extraction configures model-based fact extraction.
type Extraction struct {
	// Enabled asks a model for facts after each capture (patterns always run).
	Enabled bool `yaml:"enabled"`
	// BaseURL empty uses upstream.base_url.
	BaseURL string `yaml:"base_url"`
	// APIKey empty uses upstream.api_key.
	APIKey string `yaml:"api_key"`
	// Model is the extraction model.
	Model string `yaml:"model"`
}

// Embeddings configures the embedder.
type Embeddings struct {
	// Provider is encoder (the default: the built-in sentence encoder, in
	// process, offline, 512 dimensions; about 6 ms of CPU per 20-word query
	// on a Zen 5 core, and on LoCoMo 0.82 against local's 0.77, see
	// BENCHMARKS.md), local (hashed words and WordNet concepts, 384
	// dimensions; deterministic, offline, well under a millisecond: the fast
	// option) or openai (a remote endpoint). After a change, run `gateway
	// reindex`.
	Provider string `yaml:"provider"`
	// BaseURL empty uses upstream.base_url (provider openai).
	BaseURL string `yaml:"base_url"`
	// APIKey empty uses upstream.api_key (provider openai).
	APIKey string `yaml:"api_key"`
	// Model is the embedding model (provider openai).
	Model string `yaml:"model"`
	// Dimensions of the vectors; 0 is the provider's own (encoder 512,
	// local and openai 384). The encoder makes 512 only.
	Dimensions int `yaml:"dimensions"`
	// Batch is how many texts one embeddings call carries (openai).
	Batch int `yaml:"batch"`
	// Concurrency is how many encoder calls run at once (provider
	// encoder); 0 is the number of CPUs Go uses (GOMAXPROCS). A query that
	// finds them all busy waits at most memory.embedding_timeout, then
	// searches with full text alone (X-Memory-Degraded: embedding).
	Concurrency int `yaml:"concurrency"`
}

// EncoderDims is the built-in encoder's vector dimension.
const EncoderDims = 512

// Dims returns the vector dimension: Dimensions, or when 0 the
// provider's own.
func (e Embeddings) Dims() int {
	switch {
	case e.Dimensions > 0:
		return e.Dimensions
	case e.Provider == "encoder":
		return EncoderDims
	default:
		return 384
	}
}

// Key is one gateway API key.
type Key struct {
	// Hash is "sha256:<hex>" of the key (see `gateway hash-key`).
	Hash string `yaml:"hash"`
	// Tenant is the tenant the key acts for.
	Tenant string `yaml:"tenant"`
	// ChooseTenant lets the key pick another tenant with X-Memory-Tenant.
	ChooseTenant bool `yaml:"choose_tenant"`
}

// DefaultMaxBodyBytes is max_body_bytes's default (2 MiB).
const DefaultMaxBodyBytes = 2 << 20

// Default returns the configuration used when nothing overrides it.
func Default() Config {
	return Config{
		Listen:        "",
		LogLevel:      "info",
		MaxBodyBytes:  DefaultMaxBodyBytes,
		ShutdownGrace: Duration(30 * time.Second),
		Upstream: Upstream{
			BaseURL:           "https://api.openai.com/v1",
			ConnectTimeout:    Duration(5 * time.Second),
			FirstByteTimeout:  Duration(10 * time.Minute),
			IdleStreamTimeout: Duration(10 * time.Minute),
			MaxIdleConns:      1024,
			Retries:           2,
			RetryBaseDelay:    Duration(100 * time.Millisecond),
			RetryMaxDelay:     Duration(5 * time.Second),
			Breaker: Breaker{
				ConsecutiveFailures: 5,
				OpenTimeout:         Duration(30 * time.Second),
				HalfOpenRequests:    1,
			},
			Anthropic: Anthropic{BaseURL: "https://api.anthropic.com/v1"},
		},
		Store: Store{
			Driver:      "sqlite",
			SQLitePath:  "./data/memgate.db",
			RedisPrefix: "memgate:",
		},
		Capture: Capture{Worker: true, Redact: true, ReclaimAfter: Duration(30 * time.Second), EnrichInterval: Duration(250 * time.Millisecond), RetryFor: Duration(2 * time.Minute), LockStuckAfter: Duration(5 * time.Minute), ImportMaxMessages: 1000,
			MaxHistoryMessages: 2000, SkipTranscripts: true},
		Memory: Memory{
			RecentMessages:    20,
			Cache:             Cache{VectorsMB: 128, TextsMB: 128, ItemsMB: 32, TurnsMB: 16, RecentMB: 8},
			LoadTimeout:       Duration(150 * time.Millisecond),
			EmbeddingTimeout:  Duration(300 * time.Millisecond),
			MaxContextTokens:  8000,
			CompletionReserve: 1024,
			Shares:            Shares{Summary: 0.25, Pinned: 0.10, Facts: 0.10, Recall: 0.20, StatementRecall: 0},
			Position:          "system",
			FillRecall:        true,
			FillRecallWhen:    "asked",
			KeepRecallResent:  true,
			StableFacts:       true,
			HoldSummary:       true,
		},
		Compaction: Compaction{
			Enabled:          true,
			Model:            "gpt-4o-mini",
			MaxSummaryTokens: 600,
			HighWatermark:    0.9,
			LowWatermark:     0.4,
			MaxMessages:      20,
			KeepMessages:     10,
			FallbackAfter:    3,
			Timeout:          Duration(30 * time.Second),
		},
		Security: Security{
			Passthrough:            append([]string(nil), DefaultPassthrough...),
			ProviderStateRetention: Duration(DefaultProviderStateRetention),
			FailedAuthBurst:        20,
			FailedAuthRefill:       Duration(3 * time.Second),
			SessionIdle:            Duration(8 * time.Hour),
			SessionMaxAge:          Duration(12 * time.Hour),
		},
		Recall: Recall{
			Enabled:           true,
			CrossConversation: true,
			TopK:              5,
			MinSimilarity:     0.2,
			RecencyHalfLife:   0,
			FactsMaxStored:    200,
			FactsMaxInjected:  20,
			Extraction:        Extraction{Enabled: true, Model: "gpt-4o-mini"},
			Embeddings:        Embeddings{Provider: "encoder", Model: "text-embedding-3-small", Batch: 64},
		},
	}
}

// Load builds the configuration: defaults, then the YAML file named by
// GATEWAY_CONFIG (if any), then environment overrides, then Validate.
//
// An unset or empty listen address is DefaultListen (loopback) unless
// gateway keys are configured, then DefaultListenKeyed (every interface);
// an explicit one is kept as written. A passthrough list set to null is
// DefaultPassthrough; an empty one ([]) allows none.
func Load(getenv func(string) string) (Config, error) {
	cfg := Default()
	if path := getenv("GATEWAY_CONFIG"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		if err := Decode(data, &cfg); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return Config{}, err
	}
	if cfg.Security.Passthrough == nil {
		cfg.Security.Passthrough = append([]string(nil), DefaultPassthrough...)
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
		if len(cfg.Keys) > 0 {
			cfg.Listen = DefaultListenKeyed
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Decode strictly decodes YAML into cfg: unknown keys are errors.
func Decode(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// applyEnv overrides cfg from the GATEWAY_* variables.
func applyEnv(cfg *Config, getenv func(string) string) error {
	str := map[string]*string{
		"GATEWAY_LISTEN":             &cfg.Listen,
		"GATEWAY_LOG_LEVEL":          &cfg.LogLevel,
		"GATEWAY_UPSTREAM_BASE_URL":  &cfg.Upstream.BaseURL,
		"GATEWAY_UPSTREAM_API_KEY":   &cfg.Upstream.APIKey,
		"GATEWAY_ANTHROPIC_BASE_URL": &cfg.Upstream.Anthropic.BaseURL,
		"GATEWAY_ANTHROPIC_API_KEY":  &cfg.Upstream.Anthropic.APIKey,
		"GATEWAY_STORE":              &cfg.Store.Driver,
		"GATEWAY_SQLITE_PATH":        &cfg.Store.SQLitePath,
		"GATEWAY_POSTGRES_URL":       &cfg.Store.PostgresURL,
		"GATEWAY_REDIS_URL":          &cfg.Store.RedisURL,
		"GATEWAY_ADMIN_KEY":          &cfg.AdminKey,
		"GATEWAY_METRICS_KEY":        &cfg.Security.MetricsKey,
	}
	for name, dst := range str {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	if v := getenv("GATEWAY_KEY"); v != "" {
		// A gateway key for the default tenant, plain or sha256:<hex>.
		h := v
		if !strings.HasPrefix(v, "sha256:") {
			sum := sha256.Sum256([]byte(v))
			h = "sha256:" + hex.EncodeToString(sum[:])
		}
		cfg.Keys = append(cfg.Keys, Key{Hash: h, Tenant: "default"})
	}
	if v := getenv("GATEWAY_EMBEDDINGS_PROVIDER"); v != "" {
		cfg.Recall.Embeddings.Provider = v
	}
	if v := getenv("GATEWAY_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("GATEWAY_MAX_BODY_BYTES: %q is not a whole number", v)
		}
		cfg.MaxBodyBytes = n
	}
	return nil
}

// Validate checks every value and names the offending key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, a...)...))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.MaxBodyBytes <= 0 {
		bad("max_body_bytes", "must be positive")
	}
	if u, err := url.Parse(c.Upstream.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("upstream.base_url", "%q is not an http(s) URL", c.Upstream.BaseURL)
	}
	if u, err := url.Parse(c.Upstream.Anthropic.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("upstream.anthropic.base_url", "%q is not an http(s) URL", c.Upstream.Anthropic.BaseURL)
	}
	for key, d := range map[string]Duration{
		"upstream.connect_timeout":      c.Upstream.ConnectTimeout,
		"upstream.first_byte_timeout":   c.Upstream.FirstByteTimeout,
		"upstream.idle_stream_timeout":  c.Upstream.IdleStreamTimeout,
		"upstream.retry_base_delay":     c.Upstream.RetryBaseDelay,
		"upstream.retry_max_delay":      c.Upstream.RetryMaxDelay,
		"upstream.breaker.open_timeout": c.Upstream.Breaker.OpenTimeout,
		"shutdown_grace":                c.ShutdownGrace,
		"memory.load_timeout":           c.Memory.LoadTimeout,
		"memory.embedding_timeout":      c.Memory.EmbeddingTimeout,
		"capture.enrich_interval":       c.Capture.EnrichInterval,
		"capture.retry_for":             c.Capture.RetryFor,
		"capture.lock_stuck_after":      c.Capture.LockStuckAfter,
	} {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}
	if c.Capture.RetryFor > MaxRetryFor {
		bad("capture.retry_for", "must be at most "+time.Duration(MaxRetryFor).String()+": a deleted conversation's tombstone outlives a turn retried no longer (the tombstone of one never stored goes after 7 days)")
	}
	if c.Capture.MaxHistoryMessages <= 0 {
		bad("capture.max_history_messages", "must be positive")
	}
	if c.Capture.ImportMaxMessages <= 0 {
		bad("capture.import_max_messages", "must be positive")
	}
	if c.Upstream.MaxIdleConns <= 0 {
		bad("upstream.max_idle_conns", "must be positive")
	}
	if c.Upstream.Retries < 0 {
		bad("upstream.retries", "must not be negative")
	}
	if c.Upstream.Breaker.ConsecutiveFailures <= 0 {
		bad("upstream.breaker.consecutive_failures", "must be positive")
	}
	if c.Upstream.Breaker.HalfOpenRequests <= 0 {
		bad("upstream.breaker.half_open_requests", "must be positive")
	}
	for model, n := range c.ContextWindows {
		if n <= 0 {
			bad("context_windows."+model, "must be positive")
		}
	}
	switch c.Store.Driver {
	case "sqlite":
		if c.Store.SQLitePath == "" {
			bad("store.sqlite_path", "must not be empty with the sqlite driver")
		}
	case "postgres":
		if c.Store.PostgresURL == "" {
			bad("store.postgres_url", "must be set with the postgres driver")
		}
	default:
		bad("store.driver", "%q is not sqlite or postgres", c.Store.Driver)
	}
	if c.Memory.RecentMessages < 0 {
		bad("memory.recent_messages", "must not be negative")
	}
	if c.Memory.MaxContextTokens <= 0 {
		bad("memory.max_context_tokens", "must be positive")
	}
	if c.Memory.CompletionReserve < 0 {
		bad("memory.completion_reserve", "must not be negative")
	}
	if c.Memory.Position != "system" && c.Memory.Position != "user" {
		bad("memory.position", "%q is not system or user", c.Memory.Position)
	}
	for key, mb := range map[string]int{"memory.cache.vectors_mb": c.Memory.Cache.VectorsMB,
		"memory.cache.texts_mb": c.Memory.Cache.TextsMB, "memory.cache.items_mb": c.Memory.Cache.ItemsMB,
		"memory.cache.turns_mb": c.Memory.Cache.TurnsMB, "memory.cache.recent_mb": c.Memory.Cache.RecentMB} {
		if mb <= 0 || mb > 1<<20 {
			bad(key, "must be between 1 and 1048576 (MiB)")
		}
	}
	if w := c.Memory.FillRecallWhen; w != "always" && w != "asked" {
		bad("memory.fill_recall_when", "%q is not always or asked", w)
	}
	sh := c.Memory.Shares
	for key, v := range map[string]float64{"memory.shares.summary": sh.Summary, "memory.shares.extractive_summary": sh.ExtractiveSummary, "memory.shares.pinned": sh.Pinned, "memory.shares.facts": sh.Facts, "memory.shares.recall": sh.Recall, "memory.shares.statement_recall": sh.StatementRecall} {
		if v < 0 || v > 1 {
			bad(key, "must be between 0 and 1")
		}
	}
	if sh.Total() > 1 {
		bad("memory.shares", "summary + pinned + facts + recall must not exceed 1")
	}
	cp := c.Compaction
	if cp.MaxSummaryTokens <= 0 {
		bad("compaction.max_summary_tokens", "must be positive")
	}
	if cp.LowWatermark <= 0 || cp.HighWatermark > 1 || cp.LowWatermark >= cp.HighWatermark {
		bad("compaction.low_watermark", "must satisfy 0 < low_watermark < high_watermark <= 1")
	}
	if cp.KeepMessages < 0 || cp.MaxMessages <= cp.KeepMessages {
		bad("compaction.max_messages", "must exceed compaction.keep_messages (>= 0)")
	}
	if cp.FallbackAfter <= 0 {
		bad("compaction.fallback_after", "must be positive")
	}
	if cp.Timeout <= 0 {
		bad("compaction.timeout", "must be positive")
	}
	rc := c.Recall
	if rc.TopK < 0 {
		bad("recall.top_k", "must not be negative")
	}
	if rc.MinSimilarity < -1 || rc.MinSimilarity > 1 {
		bad("recall.min_similarity", "must be between -1 and 1")
	}
	if rc.RecencyHalfLife < 0 {
		bad("recall.recency_half_life", "must not be negative")
	}
	if rc.FactsMaxStored <= 0 {
		bad("recall.facts_max_stored", "must be positive")
	}
	if rc.FactsMaxInjected < 0 {
		bad("recall.facts_max_injected", "must not be negative")
	}
	for typ, d := range rc.FactTTL {
		if !validFactType(typ) {
			bad("recall.fact_ttl."+typ, "is not a fact type (profile, preference, goal, limit, decision, relationship, event)")
		}
		if d <= 0 {
			bad("recall.fact_ttl."+typ, "must be positive")
		}
	}
	switch rc.Embeddings.Provider {
	case "encoder":
		if d := rc.Embeddings.Dimensions; d != 0 && d != EncoderDims {
			bad("recall.embeddings.dimensions", "the encoder makes %d-dimension vectors: leave it 0 or set %d", EncoderDims, EncoderDims)
		}
	case "local", "openai":
	default:
		bad("recall.embeddings.provider", "%q is not encoder, local or openai", rc.Embeddings.Provider)
	}
	if rc.Embeddings.Dimensions < 0 || rc.Embeddings.Dimensions > 16000 {
		bad("recall.embeddings.dimensions", "must be between 0 (the provider's own) and 16000")
	}
	if rc.Embeddings.Concurrency < 0 {
		bad("recall.embeddings.concurrency", "must not be negative (0: one per CPU)")
	}
	if rc.Embeddings.Batch <= 0 {
		bad("recall.embeddings.batch", "must be positive")
	}
	for i, k := range c.Keys {
		key := fmt.Sprintf("keys[%d]", i)
		if !validHash(k.Hash) {
			bad(key+".hash", "must be sha256:<64 hex digits> (see `gateway hash-key`)")
		}
		if k.Tenant == "" {
			bad(key+".tenant", "must not be empty")
		}
	}
	if strings.HasPrefix(c.AdminKey, "sha256:") && !validHash(c.AdminKey) {
		bad("admin_key", "a hashed key must be sha256:<64 hex digits>")
	}
	sec := c.Security
	if strings.HasPrefix(sec.MetricsKey, "sha256:") && !validHash(sec.MetricsKey) {
		bad("security.metrics_key", "a hashed key must be sha256:<64 hex digits>")
	}
	for i, p := range sec.Passthrough {
		if !validRoute(p) {
			bad(fmt.Sprintf("security.passthrough[%d]", i), "%q is not \"METHOD /path\" (a trailing * matches any rest)", p)
		}
	}
	for i, m := range sec.PrivateModels {
		if rest, _ := strings.CutSuffix(m, "*"); m == "" || strings.ContainsAny(rest, "* ") {
			bad(fmt.Sprintf("security.private_models[%d]", i), "%q is not a model id (a trailing * matches any rest)", m)
		}
	}
	for i, o := range sec.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad(fmt.Sprintf("security.allowed_origins[%d]", i), "%q is not an origin (http(s)://host[:port])", o)
		}
	}
	for i, h := range sec.AllowedHosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ ") {
			bad(fmt.Sprintf("security.allowed_hosts[%d]", i), "%q is not a host name", h)
		}
	}
	if sec.ProviderStateRetention <= 0 {
		bad("security.provider_state_retention", "must be positive")
	}
	if sec.FailedAuthBurst < 0 {
		bad("security.failed_auth_burst", "must not be negative")
	}
	if sec.FailedAuthBurst > 0 && sec.FailedAuthRefill <= 0 {
		bad("security.failed_auth_refill", "must be positive")
	}
	if sec.SessionIdle <= 0 {
		bad("security.session_idle", "must be positive")
	}
	if sec.SessionMaxAge <= 0 {
		bad("security.session_max_age", "must be positive")
	}
	return errors.Join(errs...)
}

// validHash reports whether s is "sha256:" and 64 hex digits.
func validHash(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// validRoute reports whether s is "METHOD /path".
func validRoute(s string) bool {
	m, p, ok := strings.Cut(s, " ")
	if !ok || m == "" || strings.ToUpper(m) != m || !strings.HasPrefix(p, "/") || strings.Contains(p, " ") {
		return false
	}
	return !strings.Contains(strings.TrimSuffix(p, "*"), "*")
}

// validFactType reports whether s names a fact type.
func validFactType(s string) bool {
	switch s {
	case "profile", "preference", "goal", "limit", "decision", "relationship", "event":
		return true
	}
	return false
}

// Duration is a time.Duration written in YAML as "150ms", "30s", "5m".
type Duration time.Duration

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// HistoryMessages is how many stored messages a request loads: enough for
// the unsummarised tail compaction leaves (twice that with
// memory.hold_summary, for the turns after a held summary), never fewer
// than memory.recent_messages.
func (c Config) HistoryMessages() int {
	n := c.Memory.RecentMessages
	if c.Compaction.Enabled && n > 0 {
		tail := c.Compaction.MaxMessages + c.Compaction.KeepMessages
		if c.Memory.HoldSummary {
			tail *= 2
		}
		n = max(n, tail)
	}
	return n
}

// Budget is the token budget of a request with no max_tokens and no
// X-Memory-Budget to a model of the given context window: the window less
// memory.completion_reserve, at most memory.max_context_tokens.
func (c Config) Budget(window int) int {
	return max(0, min(c.Memory.MaxContextTokens, window-c.Memory.CompletionReserve))
}

// Warnings are what an operator should hear at start-up about a valid
// configuration: side models with no key to send, which are then not
// called (a client's key is never reused for them).
func (c Config) Warnings() []string {
	var w []string
	if c.Compaction.Enabled && c.Compaction.APIKey == "" && c.Upstream.APIKey == "" {
		w = append(w, "no key for the summariser (compaction.api_key or upstream.api_key): summaries are extractive")
	}
	if c.Recall.Enabled && c.Recall.Extraction.Enabled && c.Recall.Extraction.APIKey == "" && c.Upstream.APIKey == "" {
		w = append(w, "no key for fact extraction (recall.extraction.api_key or upstream.api_key): only pattern-detected facts are kept")
	}
	return w
}
