package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// handlePassthrough returns the handler of the /v1 routes the gateway does
// not own for API a: through the reverse proxy to a's upstream, after
// checking the gateway key when keys are configured (errors in a's shape).
//
// With gateway keys the route must also be allow-listed (allowedRoute):
// the upstream request carries the operator's provider key, so a route
// that reads or changes what is stored at the provider (stored chat
// completions and responses, files, batches, fine-tunes, vector stores)
// would let one tenant reach every tenant's data there. An Anthropic
// client's Files API under the operator's key is checked file by file
// instead (passFiles).
func (p *Proxy) handlePassthrough(a *api) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodTrace {
			// An upstream that answers TRACE echoes the request it got,
			// the provider key the gateway added among its headers.
			a.writeError(c.Response(), &apierr.Error{Status: http.StatusMethodNotAllowed, Type: apierr.TypeInvalidRequest,
				Code: "method_not_allowed", Message: "This gateway does not forward TRACE."})
			return nil
		}
		f := &forward{x: server.ExchangeOf(r.Context()), api: a}
		if p.requireKey() {
			id, _, aerr := p.identify(r, "")
			if aerr != nil {
				a.writeError(c.Response(), aerr)
				return nil
			}
			f.tenant = id.Tenant
			f.background = p.backgroundGetOf(r, id.Tenant, id.User)
			// The Files API under the operator's key is checked file by
			// file (files.go), the list only when allow-listed.
			op, file, files := filesRoute(r)
			files = files && a == p.messages && p.sharedKey(a)
			allowed := p.allowedRoute(r)
			switch {
			case files && !(op == fileList && allowed):
				aerr = p.passFiles(r, id, f, op, file)
			case !allowed:
				aerr = routeNotAllowed(r)
			case p.sharedKey(a):
				aerr = p.passStates(c, id, f)
			}
			if aerr != nil {
				a.writeError(c.Response(), aerr)
				return nil
			}
		}
		if _, get := responseGet(r); get && !p.requireKey() && (p.deps.Held != nil || !p.pending.empty()) {
			// Without gateway keys the identity is the client's headers'.
			if id, _, aerr := p.identify(r, ""); aerr == nil {
				f.background = p.backgroundGetOf(r, id.Tenant, id.User)
			}
		}
		if a.up.shared() {
			var id string
			if f.models, id = modelsRequest(r); fineTuned(id) && !p.listsModel(id) {
				// Its id names the operator's organization.
				a.writeError(c.Response(), unknownModel(id))
				return nil
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = clientBody{ReadCloser: r.Body, f: f}
		}
		p.rp.ServeHTTP(newFinalWriter(c.Response(), nil), withForward(r, f))
		return nil
	}
}

// routeNotAllowed answers a request for a route gateway keys may not reach.
func routeNotAllowed(r *http.Request) *apierr.Error {
	return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "route_not_allowed",
		Message: "This gateway does not forward " + r.Method + " " + r.URL.Path + ": provider routes beyond chat, messages, responses, embeddings and models reach data every tenant shares; the operator may allow it in security.passthrough."}
}

// handleOther returns the handler of the /v1 routes no API owns. An
// Anthropic client's request (anthropicClient) for the model list or a
// model (GET /v1/models, /v1/models/{id}) or to the Files API
// (/v1/files[/…], see files.go) goes to the Anthropic upstream;
// any other of its requests is refused (404 not_found_error, in
// Anthropic's shape; with gateway keys after the key and route checks, so
// a bad key is still a 401) without going upstream: it would reach the
// OpenAI upstream with the client's Anthropic credentials. Every other
// request goes to the OpenAI upstream.
func (p *Proxy) handleOther() echo.HandlerFunc {
	claude, openai := p.handlePassthrough(p.messages), p.handlePassthrough(p.chat)
	return func(c echo.Context) error {
		r := c.Request()
		if !anthropicClient(r.Header) {
			return openai(c)
		}
		if models, _ := modelsRequest(r); models || isFilesPath(r.URL.Path) {
			return claude(c)
		}
		if p.requireKey() {
			if _, _, aerr := p.identify(r, ""); aerr != nil {
				p.messages.writeError(c.Response(), aerr)
				return nil
			}
			if !p.allowedRoute(r) {
				p.messages.writeError(c.Response(), routeNotAllowed(r))
				return nil
			}
		}
		p.messages.writeError(c.Response(), &apierr.Error{Status: http.StatusNotFound, Type: "not_found_error",
			Message: "This gateway forwards an Anthropic client's requests (anthropic-version) for /v1/messages, /v1/messages/…, GET /v1/models and /v1/files only; " +
				r.Method + " " + r.URL.Path + " would go to the OpenAI upstream."})
		return nil
	}
}

// anthropicClient reports whether a request with header h is an Anthropic
// client's: it carries anthropic-version (every Anthropic SDK sends it,
// the Anthropic API requires it). x-api-key alone does not make one: an
// OpenAI-compatible upstream may take its key in that header, and such a
// client's requests go to the OpenAI upstream as before.
func anthropicClient(h http.Header) bool {
	_, version := h["Anthropic-Version"]
	return version
}

// passStates checks the provider states a passthrough request under the
// operator's key names, and sets f's binding of those its reply creates
// or names: a state created here is its creator's; one named in the path
// must be the caller's, and the items the reply names of it (a background
// response's output, the items a conversation holds or was given) are
// the caller's too.
func (p *Proxy) passStates(c echo.Context, id memory.Identity, f *forward) *apierr.Error {
	r := c.Request()
	if s, ok := pathState(r.Method, r.URL.Path); ok {
		if aerr := p.checkStates(r.Context(), id, []memory.ProviderState{s}, nil, nil, unknownPathState, nil); aerr != nil {
			return aerr
		}
		if r.Method != http.MethodHead { // a reply with no body names nothing
			f.bind = p.itemsBind(f.x, id)
		}
	}
	if r.Method == http.MethodPost && r.URL.Path == conversationsPath {
		f.bind = p.newBind(f.x, id, memory.StateConversation, time.Now())
	}
	// The fixed sub-paths of the Responses API read a body that names
	// states as a create body does; compact's reply is a response of the
	// caller's.
	if responsesSubPath(r.Method, r.URL.Path) {
		f.bodyRead = true
		if aerr := p.checkBody(c, id, dialect.ResponsesStates); aerr != nil {
			return aerr
		}
		if r.URL.Path == responsesPath+"/compact" {
			f.bind = p.newBind(f.x, id, memory.StateResponse, time.Now())
		}
	}
	// A Messages token count reads the files its messages name (and
	// tells their size).
	if f.api.name == dialect.Messages && r.Method == http.MethodPost && r.URL.Path == countTokensPath {
		f.bodyRead = true
		return p.checkBody(c, id, dialect.MessagesStates)
	}
	// Items put in a conversation may name stored items by id: the
	// provider copies them into it.
	if r.Method == http.MethodPost && conversationItems(r.URL.Path) {
		f.bodyRead = true
		return p.checkBody(c, id, dialect.ConversationItems)
	}
	return nil
}

// countTokensPath counts the tokens of a Messages body.
const countTokensPath = "/v1/messages/count_tokens"

// conversationsPath creates a conversation of the Conversations API.
const conversationsPath = "/v1/conversations"

// conversationItems reports whether pth puts items in a conversation of
// the Conversations API: it creates one (with its items), or adds to one
// (/v1/conversations/{id}/items).
func conversationItems(pth string) bool {
	if pth == conversationsPath {
		return true
	}
	rest, ok := strings.CutPrefix(pth, conversationsPath+"/")
	id, tail, _ := strings.Cut(rest, "/")
	return ok && id != "" && tail == "items"
}

// checkBody reads the body of c's request and checks the stored states
// named reads it to name (items put in a conversation, the states a
// Responses sub-path body names) are id's (checkStates); the body then
// goes upstream as read, less the ids its items carry that are not id's
// (dropForeignIDs).
func (p *Proxy) checkBody(c echo.Context, id memory.Identity, named func([]byte) (*dialect.StateBody, *apierr.Error)) *apierr.Error {
	r := c.Request()
	if aerr := encodedBody(r); aerr != nil {
		return aerr
	}
	raw, aerr := apierr.ReadBody(c.Response(), r, p.opts.MaxBodyBytes)
	if aerr != nil {
		return aerr
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	sb, aerr := named(raw)
	if aerr != nil {
		return aerr
	}
	return p.checkStates(r.Context(), id, sb.States, sb.RequiredIDs, sb.CarriedIDs, unknownState, func(drop []bool) error {
		out, err := sb.DropIDs(drop)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(out))
		r.ContentLength = int64(len(out))
		r.TransferEncoding = nil
		return nil
	})
}

// encodedBody refuses a request body sent with a Content-Encoding, on the
// routes whose bodies the gateway reads before they go upstream (memory's,
// and the passthrough bodies whose provider states it checks): the
// provider would decode what the gateway read as it came, and act on what
// the gateway never checked.
func encodedBody(r *http.Request) *apierr.Error {
	enc := r.Header.Values("Content-Encoding")
	if len(enc) == 0 || len(enc) == 1 && strings.EqualFold(strings.TrimSpace(enc[0]), "identity") {
		return nil
	}
	return &apierr.Error{Status: http.StatusUnsupportedMediaType, Type: apierr.TypeInvalidRequest, Code: "unsupported_media_type",
		Message: "This gateway reads this body before it goes upstream: send it without a Content-Encoding."}
}

// responsesPath is the Responses API.
const responsesPath = "/v1/responses"

// responsesSubPaths are the fixed sub-paths the provider serves under
// /v1/responses/, which name no response: their bodies name states as a
// create body does. Any other segment there is a response id.
var responsesSubPaths = map[string]bool{"input_tokens": true, "compact": true}

// responsesSubPath reports whether method and pth post to a fixed
// sub-path of the Responses API (POST /v1/responses/input_tokens,
// /v1/responses/compact).
func responsesSubPath(method, pth string) bool {
	rest, ok := strings.CutPrefix(pth, responsesPath+"/")
	return method == http.MethodPost && ok && responsesSubPaths[rest]
}

// pathState is the provider state a passthrough request of method to pth
// names: the conversation of /v1/conversations/{id}[/…], the stored
// response of /v1/responses/{id}[/…] — none for the Responses API's fixed
// sub-paths (responsesSubPath).
func pathState(method, pth string) (memory.ProviderState, bool) {
	if responsesSubPath(method, pth) {
		return memory.ProviderState{}, false
	}
	for _, k := range []struct {
		prefix string
		kind   memory.StateKind
	}{{conversationsPath + "/", memory.StateConversation}, {responsesPath + "/", memory.StateResponse}} {
		if rest, ok := strings.CutPrefix(pth, k.prefix); ok {
			id, _, _ := strings.Cut(rest, "/")
			return memory.ProviderState{Kind: k.kind, ID: id}, true
		}
	}
	return memory.ProviderState{}, false
}

// cleanPath reports whether r's path is in clean form (no "..", ".",
// "//", trailing slash) and escapes no slash, dot or backslash: else the
// upstream, or a proxy before it, could read it as another route than
// the one matched here.
func cleanPath(r *http.Request) bool {
	pth := r.URL.Path
	if pth == "" || path.Clean(pth) != pth {
		return false
	}
	if raw := strings.ToLower(r.URL.RawPath); raw != "" &&
		(strings.Contains(raw, "%2f") || strings.Contains(raw, "%2e") || strings.Contains(raw, "%5c")) {
		return false
	}
	return !strings.Contains(pth, `\`)
}

// routeRule is one allow-listed passthrough route.
type routeRule struct {
	method, path string
	// prefix: path ended in "*", matching any rest.
	prefix bool
}

// parseRoutes reads "METHOD /path" rules, a trailing "*" matching any rest.
func parseRoutes(routes []string) ([]routeRule, error) {
	rules := make([]routeRule, 0, len(routes))
	for _, s := range routes {
		m, p, ok := strings.Cut(strings.TrimSpace(s), " ")
		p = strings.TrimSpace(p)
		if !ok || m == "" || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%q is not \"METHOD /path\"", s)
		}
		r := routeRule{method: strings.ToUpper(m), path: p}
		if rest, ok := strings.CutSuffix(p, "*"); ok {
			r.path, r.prefix = rest, true
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// allowedRoute reports whether a request's method and path are
// allow-listed. A path not in clean form (cleanPath) never is.
func (p *Proxy) allowedRoute(r *http.Request) bool {
	if !cleanPath(r) {
		return false
	}
	pth := r.URL.Path
	for _, rule := range p.allowed {
		if rule.method != r.Method {
			continue
		}
		if rule.prefix && strings.HasPrefix(pth, rule.path) && len(pth) > len(rule.path) || !rule.prefix && pth == rule.path {
			return true
		}
	}
	return false
}
