package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/apierr"
)

// What a tenant sees of the provider's answers when memgate calls the
// provider with the operator's own key (Upstream.APIKey,
// Anthropic.APIKey): the provider then speaks about the operator's account
// — "Incorrect API key provided: sk-proj-****abcd", "Rate limit reached
// for gpt-4o in organization org-… on tokens per min", an
// openai-organization header — to tenants who share it. scrub keeps the
// answers useful and leaves that out. A client that sends its own key gets
// the provider's answers unchanged: the account is its own.

// accountHeaders are the provider's response headers that name the
// operator's account or where it runs (Azure's deployment and region).
var accountHeaders = []string{"Openai-Organization", "Openai-Project", "Anthropic-Organization-Id", "Azureml-Model-Deployment", "X-Ms-Region"}

// accountRequestHeaders are the request headers that choose which of the
// key's organizations or projects a request is made for: a client
// calling with the operator's key never sends them upstream.
var accountRequestHeaders = []string{"Openai-Organization", "Openai-Project"}

// accountHeaderPrefixes start the headers that describe the operator's
// quota: with one key for every tenant, its remaining requests and tokens
// fall as any tenant uses it, so a tenant reading them watches the others'
// traffic (and an SDK does not use them: it backs off by Retry-After and
// X-Should-Retry, which stay).
var accountHeaderPrefixes = []string{"X-Ratelimit-", "Anthropic-Ratelimit-"}

// dropAccountHeaders deletes h's account headers (canonical keys).
func dropAccountHeaders(h http.Header) {
	for _, k := range accountHeaders {
		delete(h, k)
	}
	for k := range h {
		for _, p := range accountHeaderPrefixes {
			if strings.HasPrefix(k, p) {
				delete(h, k)
			}
		}
	}
}

// accountIDs matches what identifies the operator's account in a
// provider's error message: OpenAI organization, project and user ids,
// Anthropic workspace ids, UUIDs (Anthropic's organization ids), API keys
// and masked key fragments ("sk-proj-****abcd", "****abcd").
var accountIDs = regexp.MustCompile(`\b(?:org-|proj_|wrkspc_)[A-Za-z0-9]{4,}` +
	`|\buser-[A-Za-z0-9]{20,}` +
	`|\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b` +
	`|\bsk-[A-Za-z0-9_*-]{4,}` +
	`|[A-Za-z0-9_-]*\*{4,}[A-Za-z0-9_-]*`)

// redacted replaces what accountIDs matches.
const redacted = "[redacted]"

// maxErrorBody bounds an upstream error body read to be scrubbed; a larger
// one is replaced by a gateway error.
const maxErrorBody = 1 << 20

// minSecret is the shortest configured key redact looks for as itself: a
// shorter one ("x", "EMPTY", "none": what a local server such as vLLM is
// given) is a placeholder, not a secret, and replacing it wherever it
// occurs would garble the error ("context_length_e[redacted]ceeded").
const minSecret = 8

// redact returns b without the operator's key and account ids.
func (t *target) redact(b []byte) []byte {
	if len(t.secret) >= minSecret {
		b = bytes.ReplaceAll(b, []byte(t.secret), []byte(redacted))
	}
	return accountIDs.ReplaceAll(b, []byte(redacted))
}

// scrub edits the upstream's answer to a request that carried the
// operator's key, before it is relayed: the account headers are dropped; a
// 401 or 403 (the provider refused the operator's key, or what it may do)
// becomes a gateway 502 saying so, with X-Should-Retry: false; another
// error body has the account ids redacted in place, its shape and status
// kept; an event stream has them redacted from its error events; a model
// list or lookup (f.models, see models.go) leaves out the operator's
// own; a file's content (f.download) goes byte for byte, whatever its
// type.
func (p *Proxy) scrub(resp *http.Response, f *forward) error {
	a, requestID := f.api, f.x.ID()
	dropAccountHeaders(resp.Header)
	if f.models && resp.StatusCode/100 == 2 {
		return p.scrubModels(resp, a)
	}
	if resp.StatusCode < 400 && f.download {
		return nil
	}
	if resp.StatusCode < 400 {
		if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
			// Redacting changes the length of an upstream's stream
			// small enough to come with one.
			resp.Body = &scrubStream{ReadCloser: resp.Body, t: a.up}
			resp.ContentLength = -1
			delete(resp.Header, "Content-Length")
		}
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	if err != nil {
		return fmt.Errorf("read upstream error: %w", err)
	}
	if enc := resp.Header.Get("Content-Encoding"); len(body) > maxErrorBody || enc != "" && enc != "identity" {
		// Not readable here (left encoded: see decode): the status
		// stays, the body is the gateway's.
		replace(resp, a, &apierr.Error{Status: resp.StatusCode, Type: apierr.TypeUpstream, Code: "upstream_error",
			Message: "The upstream API answered " + strconv.Itoa(resp.StatusCode) + "; its error message was withheld."})
		return nil
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		p.log.Warn("the upstream refused the configured provider key", "request_id", requestID,
			"status", resp.StatusCode, "upstream", a.up.base.Host)
		replace(resp, a, credentialsRefused(resp.StatusCode, a.up.redact(body)))
		resp.Header.Set("X-Should-Retry", "false")
		return nil
	}
	if resp.StatusCode == http.StatusTooManyRequests && quotaExhausted(body) {
		p.log.Warn("the upstream says the configured provider account has no quota left", "request_id", requestID,
			"upstream", a.up.base.Host)
		replace(resp, a, &apierr.Error{Status: http.StatusBadGateway, Type: apierr.TypeUpstream, Code: "upstream_quota_exhausted",
			Message: "The upstream provider says the gateway's provider account has no quota left; your request and key are not at fault. The gateway's operator must fix its provider account."})
		resp.Header.Set("X-Should-Retry", "false")
		return nil
	}
	body = a.up.redact(body)
	setBody(resp, body)
	return nil
}

// credentialsRefused is the gateway's answer when the provider refused the
// operator's key with status: a 502, not the provider's 401 or 403, since
// the client's own credentials were fine and it cannot fix the operator's
// (an SDK would report a 401 as the client's bad key). body is the
// provider's redacted answer; its message is quoted for the operator.
func credentialsRefused(status int, body []byte) *apierr.Error {
	msg := "The upstream provider refused the gateway's provider credentials (HTTP " + strconv.Itoa(status) +
		"); your request and key are not at fault. The gateway's operator must fix its provider key or account."
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		said := []rune(e.Error.Message)
		msg += " The provider said: " + string(said[:min(len(said), 300)])
	}
	return &apierr.Error{Status: http.StatusBadGateway, Type: apierr.TypeUpstream, Code: "upstream_credentials_refused", Message: msg}
}

// quotaExhausted reports whether a 429's body says the account has no
// quota left (OpenAI's insufficient_quota, as code or type): not a rate to
// wait out, the operator's billing, which no retry and no tenant can fix.
func quotaExhausted(body []byte) bool {
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && (e.Error.Type == "insufficient_quota" || e.Error.Code == "insufficient_quota")
}

// setBody makes body, read whole from resp, resp's body and length.
func setBody(resp *http.Response, body []byte) {
	resp.Body = readCloser{Reader: bytes.NewReader(body), Closer: resp.Body}
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// replace makes resp the gateway error e in a's error shape.
func replace(resp *http.Response, a *api, e *apierr.Error) {
	var w bufferedResponse
	w.header = http.Header{}
	a.writeError(&w, e)
	for _, k := range []string{"Content-Type", "Content-Length", "Content-Encoding"} {
		delete(resp.Header, k)
	}
	for k, v := range w.header {
		resp.Header[k] = v
	}
	resp.StatusCode = w.status
	resp.Status = strconv.Itoa(w.status) + " " + http.StatusText(w.status)
	resp.ContentLength = int64(w.body.Len())
	resp.Body = readCloser{Reader: &w.body, Closer: resp.Body}
}

// bufferedResponse is an http.ResponseWriter that keeps what is written.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header         { return w.header }
func (w *bufferedResponse) WriteHeader(status int)      { w.status = status }
func (w *bufferedResponse) Write(b []byte) (int, error) { return w.body.Write(b) }

// maxEventLine bounds a stream line held to be scrubbed whole. A longer
// line is judged by its first maxEventLine bytes: the data of an error
// event is replaced by the gateway's own (withheldData), the rest of the
// line dropped as it comes; another line (a large event of the model's,
// which passes unscrubbed anyway) passes as it comes.
const maxEventLine = 1 << 20

// What scrubStream does with a line longer than maxEventLine, until its
// line ending.
const (
	overNone = iota // the line is not over the bound
	overPass        // relayed as it comes
	overDrop        // replaced: dropped as it comes
)

// scrubStream redacts the operator's account ids from the error events of
// an event stream as it is relayed, and leaves every other event byte for
// byte (a model's text may well mention an org-… id). An error event is
// one named error (Anthropic, Responses) or response.failed (Responses),
// or an unnamed one whose data is an error (errorData: a chat completions
// error, or a typed one from an upstream that names no events).
// Lines are released whole, as they complete; it holds at most
// maxEventLine bytes and one read of a line.
type scrubStream struct {
	io.ReadCloser
	t *target

	line   []byte // the current line, not yet complete
	out    []byte // scrubbed bytes, read from off on
	off    int
	named  bool // the current event has an event: field
	fault  bool // the current event is an error event
	failed bool // the current event is named response.failed
	over   int  // the current line outgrew maxEventLine (overPass, overDrop)
	// afterCR: the last line ended in a CR at the end of a read; an LF
	// that follows belongs to that line's ending.
	afterCR bool
	err     error // the upstream's error, returned after out
}

func (s *scrubStream) Read(p []byte) (int, error) {
	for s.off == len(s.out) && s.err == nil {
		// p is scratch until the scrubbed bytes are copied into it.
		s.out, s.off = s.out[:0], 0
		n, err := s.ReadCloser.Read(p)
		s.feed(p[:n])
		if err != nil {
			if len(s.line) > 0 {
				s.out = append(s.out, s.scrubLine(s.line)...)
				s.line = s.line[:0]
			}
			s.err = err
		}
	}
	if s.off < len(s.out) {
		n := copy(p, s.out[s.off:])
		s.off += n
		return n, nil
	}
	return 0, s.err
}

// feed adds chunk to the current line, releasing each line it completes.
// A line ends in LF, CRLF or CR (the SSE grammar, as sse.Decoder reads
// it): a CR ends its line at once, and an LF right after it, in this
// chunk or the next, is the rest of that line ending.
func (s *scrubStream) feed(chunk []byte) {
	for len(chunk) > 0 {
		if s.afterCR {
			s.afterCR = false
			if chunk[0] == '\n' {
				s.out = append(s.out, '\n')
				chunk = chunk[1:]
				continue
			}
		}
		// The line ending, when chunk has one, is chunk[j:i+1].
		j := bytes.IndexAny(chunk, "\r\n")
		i := j
		if j >= 0 && chunk[j] == '\r' {
			switch {
			case j+1 == len(chunk):
				s.afterCR = true
			case chunk[j+1] == '\n':
				i++
			}
		}
		switch {
		case s.over != overNone && j < 0:
			if s.over == overPass {
				s.out = append(s.out, chunk...)
			}
			return
		case s.over != overNone:
			if s.over == overPass {
				s.out = append(s.out, chunk[:j]...)
			}
			s.out = append(s.out, chunk[j:i+1]...)
			s.over = overNone
		case j < 0:
			s.line = append(s.line, chunk...)
			if len(s.line) > maxEventLine {
				s.overflow()
			}
			return
		case len(s.line)+j > maxEventLine:
			s.line = append(s.line, chunk[:j]...)
			s.overflow()
			s.out = append(s.out, chunk[j:i+1]...)
			s.over = overNone
		case len(s.line) == 0:
			s.out = append(s.out, s.scrubLine(chunk[:i+1])...)
		default:
			s.line = append(s.line, chunk[:i+1]...)
			s.out = append(s.out, s.scrubLine(s.line)...)
			s.line = s.line[:0]
		}
		chunk = chunk[i+1:]
	}
}

// overflow releases the current line, grown past maxEventLine without its
// line ending, as its first maxEventLine bytes tell: the data line of an
// error event becomes the gateway's error data (withheldData), and what
// follows of it is dropped; another line passes as it comes.
func (s *scrubStream) overflow() {
	head := s.line[:min(len(s.line), maxEventLine)]
	if kind := s.faultKind(head); kind != "" {
		s.out = append(s.out, "data: "...)
		s.out = append(s.out, withheldData[kind]...)
		s.over = overDrop
	} else {
		s.out = append(s.out, s.line...)
		s.over = overPass
	}
	s.line = s.line[:0]
}

// faultKind tells whether head, the start of a line of the current event,
// begins the data of an error event, and of which shape: "response.failed"
// (an event so named or typed), "error" (an event so named or typed), or
// "chat" (an unnamed chat completions error); "" when it does not. Of an
// unnamed event it reads the members of the data's object before the cut
// (errorHead).
func (s *scrubStream) faultKind(head []byte) string {
	data, ok := bytes.CutPrefix(head, []byte("data:"))
	switch {
	case !ok:
		return ""
	case s.failed:
		return "response.failed"
	case s.fault:
		return "error"
	case !s.named:
		return errorHead(data)
	}
	return ""
}

// withheldMessage explains the gateway's error data that replaces an
// error event too long to scrub.
const withheldMessage = "The upstream API sent an error event too long for the gateway to check; its message was withheld."

// withheldData is the gateway's error data replacing an error event's
// data too long to scrub, by the event's shape (faultKind): each reads as
// an error to the SDKs of its API and to the capture's stream readers.
var withheldData = map[string]string{
	"chat": `{"error":{"message":"` + withheldMessage + `","type":"` + apierr.TypeUpstream + `","param":null,"code":"upstream_error"}}`,
	// Anthropic's error event (type, error) and the Responses API's (type,
	// code, message) in one.
	"error": `{"type":"error","error":{"type":"api_error","message":"` + withheldMessage + `"},"code":"upstream_error","message":"` + withheldMessage + `"}`,
	"response.failed": `{"type":"response.failed","response":{"object":"response","status":"failed",` +
		`"error":{"code":"server_error","message":"` + withheldMessage + `"},"output":[]}}`,
}

// errorHead is errorData for the start of an event's data, cut anywhere:
// it reads the members of the data's object up to the cut, and returns
// the error's shape (as faultKind) once a member says it is an error —
// "error" not null, or "type" error or response.failed — and "" when none
// before the cut does.
func errorHead(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		switch key {
		case "error":
			v, err := dec.Token()
			if err != nil {
				return ""
			}
			if v != nil {
				return "chat"
			}
		case "type":
			v, err := dec.Token()
			if err != nil {
				return ""
			}
			if v == "error" || v == "response.failed" {
				return v.(string)
			}
			if _, ok := v.(json.Delim); ok {
				return "" // not a string: not an event's type
			}
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return ""
			}
		}
	}
	return ""
}

// scrubLine returns one line of the stream (with its line ending) as
// relayed, following which event it belongs to.
func (s *scrubStream) scrubLine(line []byte) []byte {
	l := bytes.TrimRight(line, "\r\n")
	switch {
	case len(l) == 0:
		s.named, s.fault, s.failed = false, false, false
	case sseField(l, "event", "error"):
		s.named, s.fault, s.failed = true, true, false
	case sseField(l, "event", "response.failed"):
		s.named, s.fault, s.failed = true, true, true
	case bytes.HasPrefix(l, []byte("event:")):
		s.named = true
	case bytes.HasPrefix(l, []byte("data:")) && (s.fault || !s.named && errorData(l[len("data:"):])):
		return s.t.redact(line)
	}
	return line
}

// errorData reports whether the data of an event the stream did not name
// is an error, as the capture's stream readers tell one: a chat completions
// error ({"error":{…}}), or an event whose type is error (Anthropic, the
// Responses API) or response.failed, from an upstream that sends no
// event: lines. Only then does it hold "error" or "response.failed" as a
// JSON string outside a string, where a model's text would escape the
// quotes.
func errorData(data []byte) bool {
	if !bytes.Contains(data, []byte(`"error"`)) && !bytes.Contains(data, []byte(`"response.failed"`)) {
		return false
	}
	var e struct {
		Error json.RawMessage `json:"error"`
		Type  string          `json:"type"`
	}
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	return len(e.Error) > 0 && string(e.Error) != "null" || e.Type == "error" || e.Type == "response.failed"
}
