package proxy

import (
	"encoding/json"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

var messageCases = []string{
	`{"role":"user","content":"hi"}`,
	`{"role":"user","content":null}`,
	`{"role":"user"}`,
	`{"role":"","content":"hi"}`,
	`{"content":"hi"}`,
	`{"role":null,"content":"hi"}`,
	`{"role":"user","ROLE":null}`,
	`{"role":"user","Role":""}`,
	`{"Role":"user"}`,
	`{"r\u006fle":"user"}`,
	`{"role":5}`,
	`{"role":"user","content":42}`,
	`{"role":"user","content":true}`,
	`{"role":"user","content":{"type":"text"}}`,
	`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}`,
	`{"role":"user","content":[null,{"type":"text","text":null}]}`,
	`{"role":"user","content":[{"type":1}]}`,
	`{"role":"user","content":[{"TEXT":[1]}]}`,
	`{"role":"user","content":["text"]}`,
	`{"role":"user","content":[[]]}`,
	`{"role":"user","name":"bob","tool_call_id":null,"refusal":null}`,
	`{"role":"user","name":7}`,
	`{"role":"tool","tool_call_id":{"a":1},"content":"x"}`,
	`{"role":"assistant","refusal":"no"}`,
	`{"role":"assistant","refusal":false}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
	`{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"a":1}}}]}`,
	`{"role":"assistant","tool_calls":[{"id":1}]}`,
	`{"role":"assistant","tool_calls":[{"function":null},null]}`,
	`{"role":"assistant","tool_calls":[{"function":"f"}]}`,
	`{"role":"assistant","tool_calls":{"id":"c1"}}`,
	`{"role":"assistant","tool_calls":[5]}`,
	`{"role":"assistant","x_vendor":{"role":5,"content":[1]}}`,
	`"user"`,
	`[{"role":"user"}]`,
	`null`,
	`42`,
}

// TestCheckMessagesAgreesWithParseMessage proves the fast check accepts and
// rejects exactly what memory.ParseMessage does, and never vouches for a
// message ParseMessage rejects.
func TestCheckMessagesAgreesWithParseMessage(t *testing.T) {
	for _, c := range messageCases {
		t.Run(c, func(t *testing.T) { checkAgrees(t, []byte(c)) })
	}
}

func checkAgrees(t *testing.T, m []byte) {
	_, perr := memory.ParseMessage(m)
	if messageLooksValid(m) && perr != nil {
		t.Errorf("fast check vouched for %s, ParseMessage says %v", m, perr)
	}
	if cerr := checkMessages([]json.RawMessage{m}); (cerr == nil) != (perr == nil) {
		t.Errorf("checkMessages(%s) = %v, ParseMessage = %v", m, cerr, perr)
	}
}

func FuzzCheckMessages(f *testing.F) {
	for _, c := range messageCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, m string) {
		if !json.Valid([]byte(m)) {
			return
		}
		checkAgrees(t, []byte(m))
	})
}
