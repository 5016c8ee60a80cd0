// Package apierr is the OpenAI error shape every memgate route answers
// with, {"error":{"message","type","param","code"}}, and the request-body
// reading that turns an over-limit body into a readable 413 of that shape.
// The proxy, the management API and the server's own errors (unknown route,
// panic) share it, so a client's SDK parses every gateway error the same way.
package apierr

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Error types of gateway-originated errors, as OpenAI names them.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeUpstream       = "upstream_error"
	TypeServer         = "server_error"
)

// Error is a gateway-originated error, written in OpenAI's shape.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *Error) Error() string { return strconv.Itoa(e.Status) + " " + e.Type + ": " + e.Message }

// Invalid returns a 400 invalid_request_error naming param.
func Invalid(param, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Message: msg}
}

// RepeatedKey returns the 400 for the message at param (the body, when
// "") that gives key more than once (memory.RepeatedKey): stored and
// replayed verbatim, its value would depend on the parser that reads it.
func RepeatedKey(param, key string) *Error {
	subject := param
	if subject == "" {
		subject = "The request body"
	}
	return Invalid(param, subject+" gives the key "+strconv.Quote(key)+" more than once (in any case or escaping): its value would depend on the parser.")
}

// Unavailable returns a 503 server_error with code memory_unavailable.
func Unavailable(msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "memory_unavailable", Message: msg}
}

// wire is the JSON form of Error.
type wire struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// Write writes e as the response. It must be called before anything else
// was written.
func Write(w http.ResponseWriter, e *Error) {
	var body wire
	body.Error.Message = e.Message
	body.Error.Type = e.Type
	if e.Param != "" {
		body.Error.Param = &e.Param
	}
	if e.Code != "" {
		body.Error.Code = &e.Code
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

// WriteJSON writes v as a JSON response with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Write(w, &Error{Status: http.StatusInternalServerError, Type: TypeServer, Message: "The response could not be encoded."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// preallocBytes is the most ReadBody allocates for a body before its
// bytes arrive.
const preallocBytes = 64 << 10

// BodyReadTimeout bounds reading a request body. The server has no read
// timeout (it would cut streams that last as long as the model writes), so
// whatever reads a body sets its connection's read deadline (BodyDeadline).
const BodyReadTimeout = 60 * time.Second

// BodyDeadline gives the body of the request w answers BodyReadTimeout to
// arrive, through the connection's read deadline (http.ResponseController;
// a writer without one, a test's, is left as it is), and returns the
// function that lifts the deadline once the body is read: a read past it
// fails, and the handler answers or the connection closes. A client
// dribbling a body thus holds a goroutine and its buffer for a minute at
// most.
func BodyDeadline(w http.ResponseWriter) (lift func()) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(BodyReadTimeout)) != nil {
		return func() {}
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// ReadBody reads the request body through http.MaxBytesReader within
// BodyReadTimeout, answering (through the returned error) 413 when it
// exceeds limit: the handler writes that answer before the server closes the
// connection, so the client reads a 413 rather than a reset. A declared
// Content-Length over the limit is refused without reading.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	tooLarge := &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: "request_too_large",
		Message: "The request body exceeds the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes."}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer BodyDeadline(w)()
	b, err := readGrowing(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge
		}
		return nil, Invalid("", "The request body could not be read.")
	}
	return b, nil
}

// readGrowing reads body to its end into a buffer that grows as bytes
// arrive: a declared length (size > 0) sizes it up to preallocBytes only,
// so a client declaring the limit and sending little holds little of the
// gateway's memory, and the buffer doubles towards the declared length,
// never past it, so a body of its declared length ends in a buffer of
// exactly that length. A body that ends before its declared length, or
// goes on past it, is io.ErrUnexpectedEOF (the server's body reader
// enforces the declared length; a reader that does not, a test's, is held
// to it here).
func readGrowing(body io.Reader, size int64) ([]byte, error) {
	buf := make([]byte, 0, min(max(size, bytes.MinRead), preallocBytes))
	for {
		if len(buf) == cap(buf) {
			if size > 0 && int64(len(buf)) >= size {
				// Every declared byte arrived: one byte more would be
				// past the declared length, so only the end may come.
				var one [1]byte
				n, err := body.Read(one[:])
				switch {
				case n > 0:
					return nil, io.ErrUnexpectedEOF
				case err == io.EOF:
					return buf, nil
				case err != nil:
					return nil, err
				}
				continue
			}
			next := 2 * cap(buf)
			if size > 0 {
				next = int(min(int64(next), size))
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if size > 0 && int64(len(buf)) != size {
				return nil, io.ErrUnexpectedEOF
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
