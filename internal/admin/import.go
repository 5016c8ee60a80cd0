package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// Capture is what the import route needs of the capture pipeline
// (implemented by *record.Capturer): store exchanges with the ids given,
// as live capture stores them, and report what became of each.
type Capture interface {
	Import(ctx context.Context, exs []memory.Exchange) ([]record.Outcome, error)
}

// Erasures reports when a user was last erased (the zero time when never);
// the stores implement it.
type Erasures interface {
	ErasedAt(ctx context.Context, tenant, user string) (time.Time, error)
}

// ImportOptions tune the import route. Zero fields take the defaults noted.
type ImportOptions struct {
	// MaxMessages is the most messages one import may hold (default
	// DefaultImportMaxMessages).
	MaxMessages int
	// MaxBodyBytes caps the request body (default 8 MiB).
	MaxBodyBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultImportMaxMessages is the default batch limit of an import.
const DefaultImportMaxMessages = 1000

// maxFutureSkew is how far past the gateway's clock a timestamp may be
// (clients' clocks drift); later ones are refused.
const maxFutureSkew = 5 * time.Minute

// Import serves POST /v1/memory/import: a batch of past messages with the
// times they were said, stored through the capture pipeline.
type Import struct {
	resolver IdentityResolver
	capt     Capture
	erasures Erasures
	opts     ImportOptions
	log      *slog.Logger
}

// NewImport returns the import route over its collaborators. resolver may
// be nil (every caller is the default tenant); capt nil makes the route
// answer 503; erasures may be nil (the stores still drop what is dated at
// or before an erasure, but the route cannot refuse it up front).
func NewImport(resolver IdentityResolver, capt Capture, erasures Erasures, opts ImportOptions, logger *slog.Logger) *Import {
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = DefaultImportMaxMessages
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if resolver == nil {
		resolver = identity.New(nil)
	}
	return &Import{resolver: resolver, capt: capt, erasures: erasures, opts: opts, log: logger}
}

// Register adds the import route to srv.
func (im *Import) Register(srv *server.Server) {
	srv.Echo().POST("/v1/memory/import", im.handle, srv.Route("memory_admin"), guardWith(im.resolver))
}

// importRequest is the body of POST /v1/memory/import.
type importRequest struct {
	User         string            `json:"user"`
	Conversation string            `json:"conversation"`
	Model        string            `json:"model"`
	Messages     []json.RawMessage `json:"messages"`
}

// importResponse is its answer: how many messages and exchanges the batch
// held and what became of the exchanges.
type importResponse struct {
	Object       string `json:"object"`
	User         string `json:"user"`
	Conversation string `json:"conversation"`
	Messages     int    `json:"messages"`
	Skipped      int    `json:"skipped"`
	Exchanges    int    `json:"exchanges"`
	Stored       int    `json:"stored"`
	Duplicates   int    `json:"duplicates"`
	Queued       int    `json:"queued"`
	Erased       int    `json:"erased"`
}

// handle serves POST /v1/memory/import. The whole batch is validated before
// anything is stored: any bad message is a 400 naming it, and nothing of
// the batch is kept.
func (im *Import) handle(c echo.Context) error {
	if im.capt == nil {
		return apierr.Unavailable("Memory is not configured on this gateway.")
	}
	r := c.Request()
	buf, aerr := apierr.ReadBody(c.Response(), r, im.opts.MaxBodyBytes)
	if aerr != nil {
		return aerr
	}
	var req importRequest
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apierr.Invalid("", "The request body is not the JSON object expected ({\"user\",\"conversation\",\"messages\"}): "+err.Error())
	}
	if dec.More() {
		return apierr.Invalid("", "The request body must hold one JSON object.")
	}
	id, aerr := scopeOf(r, req.User, userInBody)
	if aerr != nil {
		return aerr
	}
	if !memory.ValidID(req.Conversation) {
		return apierr.Invalid("conversation", "conversation must be "+memory.IDChars+".")
	}
	id.Conversation = req.Conversation
	if len(req.Messages) == 0 {
		return apierr.Invalid("messages", "messages must hold at least one message.")
	}
	if len(req.Messages) > im.opts.MaxMessages {
		return apierr.Invalid("messages", fmt.Sprintf("An import holds at most %d messages; this one has %d. Split it into several imports, oldest first.", im.opts.MaxMessages, len(req.Messages)))
	}
	exs, skipped, aerr := buildExchanges(id, req, im.opts.Now())
	if aerr != nil {
		return aerr
	}
	for i := range exs {
		exs[i].RequestID = server.RequestID(c)
	}
	ctx := r.Context()
	if im.erasures != nil {
		erased, err := im.erasures.ErasedAt(ctx, id.Tenant, id.User)
		if err != nil {
			im.log.Error("import: erasure check failed", "request_id", server.RequestID(c), "error", err)
			return apierr.Unavailable("The memory store could not be reached.")
		}
		if !erased.IsZero() && !exs[0].At.After(erased) {
			return &apierr.Error{Status: http.StatusConflict, Type: apierr.TypeInvalidRequest, Code: "user_erased", Param: "messages",
				Message: fmt.Sprintf("This user was erased at %s; history said at or before then is not imported. Leave those messages out.", erased.UTC().Format(time.RFC3339))}
		}
	}
	outcomes, err := im.capt.Import(ctx, exs)
	if err != nil {
		im.log.Warn("import interrupted", "request_id", server.RequestID(c), "exchanges", len(exs), "error", err)
		return apierr.Unavailable("The import was interrupted before every exchange was stored; import the same batch again (nothing is stored twice).")
	}
	resp := importResponse{
		Object: "memory.import", User: id.User, Conversation: id.Conversation,
		Messages: len(req.Messages) - skipped, Skipped: skipped, Exchanges: len(exs),
	}
	failed := 0
	for _, o := range outcomes {
		switch o {
		case record.Stored:
			resp.Stored++
		case record.Duplicate:
			resp.Duplicates++
		case record.Queued:
			resp.Queued++
		case record.Erased:
			resp.Erased++
		default:
			failed++
		}
	}
	if failed > 0 {
		im.log.Error("import: exchanges not stored", "request_id", server.RequestID(c), "failed", failed, "exchanges", len(exs))
		return apierr.Unavailable(fmt.Sprintf("%d of %d exchanges could not be stored; import the same batch again (nothing is stored twice).", failed, len(exs)))
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, resp)
	return nil
}

// importedMessage is one message of an import: an OpenAI chat message and
// when it was said.
type importedMessage struct {
	msg memory.Message
	at  time.Time
}

// buildExchanges validates the messages of an import and groups them into
// exchanges as live capture stores them: the user (and tool) messages
// up to an assistant message are a turn, the assistant message its reply.
// System and developer messages are instructions, never history: they are
// skipped and counted. The messages must be in the order they were said
// (timestamps never decreasing) and end with an assistant message. Each
// exchange is dated by its first message (At) and keeps every message's
// time; its ID is derived from the tenant, user, conversation and the
// exchange's messages and times, so importing the same history again finds
// every exchange stored.
func buildExchanges(id memory.Identity, req importRequest, now time.Time) ([]memory.Exchange, int, *apierr.Error) {
	var (
		exs     []memory.Exchange
		turn    []importedMessage
		skipped int
		last    time.Time
		lastIdx = -1
		seen    = map[string]int{}
	)
	for i, raw := range req.Messages {
		m, aerr := parseImported(raw, i, now)
		if aerr != nil {
			return nil, 0, aerr
		}
		if memory.IsSystem(m.msg.Role) {
			skipped++
			continue
		}
		if m.at.Before(last) {
			return nil, 0, apierr.Invalid(fmt.Sprintf("messages[%d].timestamp", i), fmt.Sprintf("messages must be in the order they were said: messages[%d] is dated before the message before it.", i))
		}
		last, lastIdx = m.at, i
		if m.msg.Role != "assistant" {
			turn = append(turn, m)
			continue
		}
		ex := exchangeOf(id, req.Model, turn, m)
		// The same exchange said twice at the same times within one batch
		// still gets two keys.
		n := seen[ex.ID]
		seen[ex.ID] = n + 1
		if n > 0 {
			ex.ID = fmt.Sprintf("%s-%d", ex.ID, n)
		}
		exs = append(exs, ex)
		turn = nil
	}
	if len(turn) > 0 {
		return nil, 0, apierr.Invalid(fmt.Sprintf("messages[%d]", lastIdx), "The history must end with an assistant message: memgate stores it as exchanges, each a turn and its reply. Import the unanswered messages with their reply later.")
	}
	if len(exs) == 0 {
		return nil, 0, apierr.Invalid("messages", "messages hold no user or assistant message to import.")
	}
	return exs, skipped, nil
}

// parseImported reads the i-th message of an import: an OpenAI chat
// message with a "timestamp" (RFC 3339) that is not in the future. The
// timestamp is taken out of the message's raw JSON, which is what recent
// history later sends upstream.
func parseImported(raw json.RawMessage, i int, now time.Time) (importedMessage, *apierr.Error) {
	param := fmt.Sprintf("messages[%d]", i)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return importedMessage{}, apierr.Invalid(param, param+" is not a JSON object.")
	}
	// The message is stored and replayed as sent (less its timestamp): a
	// key given twice would be read another way by another parser.
	if key, dup := memory.RepeatedKey(raw); dup {
		return importedMessage{}, apierr.RepeatedKey(param, key)
	}
	ts, ok := fields["timestamp"]
	if !ok {
		return importedMessage{}, apierr.Invalid(param+".timestamp", param+" has no timestamp: every imported message needs the time it was said (RFC 3339).")
	}
	var s string
	if err := json.Unmarshal(ts, &s); err != nil {
		return importedMessage{}, apierr.Invalid(param+".timestamp", param+".timestamp must be an RFC 3339 string such as 2024-05-07T18:30:00Z.")
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return importedMessage{}, apierr.Invalid(param+".timestamp", fmt.Sprintf("%s.timestamp %q is not an RFC 3339 time such as 2024-05-07T18:30:00Z.", param, s))
	}
	if at.After(now.Add(maxFutureSkew)) {
		return importedMessage{}, apierr.Invalid(param+".timestamp", fmt.Sprintf("%s.timestamp %s is in the future.", param, s))
	}
	delete(fields, "timestamp")
	clean, err := json.Marshal(fields) // sorted keys: the same message always encodes the same
	if err != nil {
		return importedMessage{}, apierr.Invalid(param, param+" cannot be encoded: "+err.Error())
	}
	m, err := memory.ParseMessage(clean)
	if err != nil {
		return importedMessage{}, apierr.Invalid(param, param+": "+err.Error())
	}
	switch m.Role {
	case "user", "assistant", "tool", "system", "developer":
	default:
		return importedMessage{}, apierr.Invalid(param+".role", fmt.Sprintf("%s.role %q is not one of user, assistant, tool (system and developer messages are skipped).", param, m.Role))
	}
	m.CreatedAt = at.UTC()
	return importedMessage{msg: m, at: at.UTC()}, nil
}

// exchangeOf builds the exchange of a turn and its reply, with its
// deterministic ID ("im-" and 32 hex digits of a SHA-256 over the tenant,
// user, conversation, and each message's JSON and time).
func exchangeOf(id memory.Identity, model string, turn []importedMessage, reply importedMessage) memory.Exchange {
	h := sha256.New()
	for _, s := range []string{id.Tenant, id.User, id.Conversation} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	ex := memory.Exchange{Identity: id, Model: model, Reply: reply.msg, At: reply.at}
	for _, m := range append(append([]importedMessage(nil), turn...), reply) {
		h.Write(m.msg.Raw)
		h.Write([]byte{0})
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(m.at.UnixNano())))
	}
	for _, m := range turn {
		ex.Turn = append(ex.Turn, m.msg)
	}
	if len(turn) > 0 {
		ex.At = turn[0].at
	}
	ex.ID = "im-" + hex.EncodeToString(h.Sum(nil)[:16])
	return ex
}
