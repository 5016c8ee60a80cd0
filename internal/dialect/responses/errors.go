package responses

import "github.com/memgate/memgate/internal/dialect/body"

// ErrorBody returns a gateway error in OpenAI's shape, which the Responses
// API shares with Chat Completions: {"error":{"message","type","param",
// "code"}}, param and code null when empty. status is not part of the body;
// it is taken for the signature shared with the other dialects.
func ErrorBody(status int, typ, message, param, code string) []byte {
	_ = status
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: message, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	b, _ := body.Marshal(struct { // strings always encode
		Error detail `json:"error"`
	}{d})
	return b
}
