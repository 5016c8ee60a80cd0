package anthropic

import (
	"net/http"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
)

// ErrorBody returns a gateway error in Anthropic's shape,
// {"type":"error","error":{"type":…,"message":…}}. typ may be one of
// Anthropic's error types or one of the OpenAI types memgate's proxy uses;
// anything Anthropic does not define is replaced by the type Anthropic uses
// for status (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 529 overloaded_error, anything else api_error). Anthropic
// has no param or code: a param prefixes the message ("messages[2]: …")
// unless the message names it already (namesParam), and code is dropped.
func ErrorBody(status int, typ, message, param, code string) []byte {
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "api_error", "overloaded_error", "billing_error", "timeout_error":
	default:
		typ = errorType(status)
	}
	if param != "" && !namesParam(message, param) {
		message = param + ": " + message
	}
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	b, _ := body.Marshal(struct { // two strings always encode
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, message}})
	return b
}

// namesParam reports whether message names param already: it opens with
// it ("messages must be …") or gives it before a colon ("invalid header
// X-Memory-User: …").
func namesParam(message, param string) bool {
	return strings.HasPrefix(message, param+" ") || strings.HasPrefix(message, param+":") ||
		strings.Contains(message, " "+param+":")
}

// errorType is Anthropic's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}
