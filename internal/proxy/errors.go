package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Error types of gateway-originated errors, as OpenAI names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeUpstream       = "upstream_error"
	typeServer         = "server_error"
)

// apiError is a gateway-originated error, written in OpenAI's shape
// {"error":{"message","type","param","code"}}.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *apiError) Error() string { return strconv.Itoa(e.Status) + " " + e.Type + ": " + e.Message }

// invalid returns a 400 invalid_request_error naming param.
func invalid(param, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Message: msg}
}

// errorJSON is the wire form of apiError.
type errorJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// writeError writes e as the response. It must be called before anything
// else was written.
func writeError(w http.ResponseWriter, e *apiError) {
	var body errorJSON
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
