package proxy

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// checkMessages validates the messages of a request whose memory is off
// without decoding them: it accepts exactly what memory.ParseMessage
// accepts. A message the fast check doubts goes through ParseMessage, which
// has the last word and supplies the error.
func checkMessages(msgs []json.RawMessage) *apiError {
	for i, m := range msgs {
		if messageLooksValid(m) {
			continue
		}
		if _, err := memory.ParseMessage(m); err != nil {
			return invalid("messages["+strconv.Itoa(i)+"]", err.Error())
		}
	}
	return nil
}

// messageLooksValid reports whether m, an element of a valid JSON array,
// certainly passes memory.ParseMessage: an object whose role is a non-empty
// string, whose name, tool_call_id and refusal are strings (or null), whose
// content is a string, null or an array of parts with string fields, and
// whose tool_calls have string fields. encoding/json matches keys without
// regard to case, so so does this check.
func messageLooksValid(m []byte) bool {
	if len(m) == 0 || m[0] != '{' {
		return false
	}
	ok, role := true, false
	eachField(m, 0, func(key []byte, vs, ve int) *apiError {
		v := m[vs:ve]
		k := string(key)
		switch {
		case strings.EqualFold(k, "role"):
			switch {
			case v[0] == '"':
				role = len(v) > 2 // a JSON string longer than "" is never empty
			case string(v) != "null":
				ok = false
			}
		case strings.EqualFold(k, "name"), strings.EqualFold(k, "tool_call_id"), strings.EqualFold(k, "refusal"):
			ok = ok && stringOrNull(v)
		case strings.EqualFold(k, "content"):
			ok = ok && (v[0] == '"' || string(v) == "null" || arrayOf(v, partLooksValid))
		case strings.EqualFold(k, "tool_calls"):
			ok = ok && (string(v) == "null" || arrayOf(v, toolCallLooksValid))
		}
		return nil
	})
	return ok && role
}

func stringOrNull(v []byte) bool { return v[0] == '"' || string(v) == "null" }

// arrayOf reports whether v is an array whose elements are null or satisfy
// elem.
func arrayOf(v []byte, elem func([]byte) bool) bool {
	if v[0] != '[' {
		return false
	}
	for i := skipWS(v, 1); v[i] != ']'; {
		end := skipValue(v, i)
		if e := v[i:end]; string(e) != "null" && !elem(e) {
			return false
		}
		i = skipWS(v, end)
		if v[i] == ',' {
			i = skipWS(v, i+1)
		}
	}
	return true
}

// objectWith reports whether v is an object whose fields named like one of
// keys (in any case) pass check.
func objectWith(v []byte, check func(key string, val []byte) bool) bool {
	if v[0] != '{' {
		return false
	}
	ok := true
	eachField(v, 0, func(key []byte, vs, ve int) *apiError {
		ok = ok && check(string(key), v[vs:ve])
		return nil
	})
	return ok
}

func partLooksValid(v []byte) bool {
	return objectWith(v, func(k string, val []byte) bool {
		if strings.EqualFold(k, "type") || strings.EqualFold(k, "text") {
			return stringOrNull(val)
		}
		return true
	})
}

func toolCallLooksValid(v []byte) bool {
	return objectWith(v, func(k string, val []byte) bool {
		switch {
		case strings.EqualFold(k, "id"), strings.EqualFold(k, "type"):
			return stringOrNull(val)
		case strings.EqualFold(k, "function"):
			return string(val) == "null" || objectWith(val, func(k string, val []byte) bool {
				if strings.EqualFold(k, "name") || strings.EqualFold(k, "arguments") {
					return stringOrNull(val)
				}
				return true
			})
		}
		return true
	})
}
