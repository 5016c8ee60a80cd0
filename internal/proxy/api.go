package proxy

import (
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/memory"
)

// api is what the proxy needs to know of one API it serves with memory;
// everything else about the API lives in its adapter (internal/dialect).
type api struct {
	name dialect.API
	// up is the upstream the API goes to.
	up *target
	// reply reads a whole 2xx response body into the assistant message
	// capture stores, and the usage.
	reply func(body []byte) (memory.Message, *memory.Usage, error)
	// stream returns a reassembler for a streamed reply.
	stream func() replyStream
	// toollessStream, when set, returns the reassembler for a streamed
	// reply to a request that offered no tools (not a background
	// response's, which goes on without its stream), whole once its
	// message is.
	toollessStream func() replyStream
	// streamEnd reports whether a line of a streamed reply (without its
	// line ending) begins the stream's terminal event, which is held back
	// from the client until the exchange is stored; nil when the API has
	// no such line.
	streamEnd func(line []byte) bool
	// writeError answers a gateway error in the API's error shape.
	writeError func(w http.ResponseWriter, e *apierr.Error)
}

// replyStream reassembles a streamed reply for capture: it is written the
// event stream as relayed, in whatever pieces, by one goroutine.
type replyStream interface {
	io.Writer
	Result() (memory.Message, *memory.Usage, error)
	// HangUp notes that the client hung up after the events written so
	// far, and reports whether they showed a whole answer, which the
	// upstream's end is worth reading on for (see readOn).
	HangUp() bool
	// HungUpResult is the reply as Result returned it when HangUp was
	// called (whole then, or an error), whatever was written since; the
	// usage may be the stream's end's.
	HungUpResult() (memory.Message, *memory.Usage, error)
}

// target is an upstream API root and the credentials the gateway sends it.
type target struct {
	base *url.URL
	// keyHeader and key are the configured provider key and the header it
	// goes in (Authorization, X-Api-Key), replacing the client's
	// Authorization; key "" leaves the client's credentials as they are
	// (but for a gateway key in Authorization, see rewrite).
	keyHeader, key string
	// secret is the configured key alone (key without its prefix), which
	// never reaches a tenant (scrub).
	secret string
}

// newTarget returns the target for a base URL and a configured key (sent
// as prefix+key in header).
func newTarget(baseURL, header, key, prefix string) (*target, error) {
	base, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, err
	}
	t := &target{base: base, keyHeader: header}
	if key != "" {
		t.key, t.secret = prefix+key, key
	}
	return t, nil
}

// shared reports whether the target sends the operator's key: the
// provider's answers then speak of the operator's account (see scrub).
func (t *target) shared() bool { return t.key != "" }

// authorize sets the credentials of an upstream request: the configured key
// when there is one (the client's Authorization dropped), else the client's
// own, minus its Authorization when that carries a gateway key.
func (t *target) authorize(h http.Header, gatewayKeys bool) {
	switch {
	case t.shared():
		delete(h, "Authorization")
		h[t.keyHeader] = []string{t.key}
	case gatewayKeys:
		delete(h, "Authorization")
	}
}

// sseField reports whether line is the SSE field name with value (the
// space after the colon is optional, as in the SSE grammar).
func sseField(line []byte, name, value string) bool {
	// Compared as string(bytes) == string, which does not allocate: it
	// runs on every short line of every memory-on stream.
	if len(line) <= len(name) || string(line[:len(name)]) != name || line[len(name)] != ':' {
		return false
	}
	rest := line[len(name)+1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return string(rest) == value
}
