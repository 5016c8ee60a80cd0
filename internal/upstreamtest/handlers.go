package upstreamtest

import (
	"fmt"
	"net/http"
	"sync"
)

// SSE streams each payload as a "data: <payload>\n\n" event, flushing after
// each, then "data: [DONE]\n\n".
func SSE(payloads ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		rc := http.NewResponseController(w)
		for _, p := range payloads {
			fmt.Fprintf(w, "data: %s\n\n", p)
			rc.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		rc.Flush()
	})
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
}

// ErrorBody returns an OpenAI-shaped error body.
func ErrorBody(typ, code, message string) []byte {
	c := "null"
	if code != "" {
		c = q(code)
	}
	return fmt.Appendf(nil, `{"error":{"message":%s,"type":%s,"param":null,"code":%s}}`, q(message), q(typ), c)
}

// Error answers with status and an OpenAI-shaped error body.
func Error(status int, typ, code, message string) http.Handler {
	body := ErrorBody(typ, code, message)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	})
}

// JSON answers status with body as given, as application/json: another
// provider's error shape, or one a test writes out whole.
func JSON(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
}

// RateLimited answers 429 with a Retry-After header of retryAfter (seconds,
// or an HTTP date).
func RateLimited(retryAfter string) http.Handler {
	return WithHeader(Error(http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached."), "Retry-After", retryAfter)
}

// WithHeader sets a response header before calling h.
func WithHeader(h http.Handler, key, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(key, value)
		h.ServeHTTP(w, r)
	})
}

// Sequence serves the n-th request with hs[n]; once they are used up, the
// last handler serves every further request.
func Sequence(hs ...http.Handler) http.Handler {
	var mu sync.Mutex
	n := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := hs[min(n, len(hs)-1)]
		n++
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Models answers GET /v1/models with a list of two models.
func Models() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1700000000,"owned_by":"system"},{"id":"text-embedding-3-small","object":"model","created":1700000000,"owned_by":"system"}]}`)
	})
}

// Embeddings answers POST /v1/embeddings with one three-dimensional vector.
func Embeddings() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2,0.3]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":3,"total_tokens":3}}`)
	})
}

// ResponsesEvents are the events Responses streams, as (event, data) pairs.
var ResponsesEvents = [][2]string{
	{"response.created", `{"type":"response.created","response":{"id":"resp_test","status":"in_progress"}}`},
	{"response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_test","output_index":0,"content_index":0,"delta":"Hello"}`},
	{"response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_test","output_index":0,"content_index":0,"delta":" world"}`},
	{"response.completed", `{"type":"response.completed","response":{"id":"resp_test","status":"completed"}}`},
}

// Responses answers POST /v1/responses: an SSE stream of named events
// (ResponsesEvents) when the body asks for "stream": true, else a JSON
// response object.
func Responses() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cr chatRequest
		decodeJSON(r, &cr)
		if !cr.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"resp_test","object":"response","status":"completed","output":[{"type":"message","id":"msg_test","role":"assistant","content":[{"type":"output_text","text":"Hello world"}]}]}`)
			return
		}
		startSSE(w)
		rc := http.NewResponseController(w)
		for _, e := range ResponsesEvents {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
			rc.Flush()
		}
	})
}

// Default routes the OpenAI endpoints: chat completions answered with
// DefaultReply, models, embeddings and responses; anything else is a 404
// error body.
func Default() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", Chat(DefaultReply))
	mux.Handle("GET /v1/models", Models())
	mux.Handle("POST /v1/embeddings", Embeddings())
	mux.Handle("POST /v1/responses", Responses())
	mux.Handle("/", Error(http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL."))
	return mux
}

// DefaultReply is the answer of Default's chat completions.
var DefaultReply = Reply{Content: "Hello from the fake upstream."}
