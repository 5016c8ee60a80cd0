package body

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestRoundTripKeepsBytesAndOrder(t *testing.T) {
	in := `{"z": 1, "model" :"m", "a":{"x" : [1, 2]}, "text":"<b>&amp;</b>\u00e9"}`
	o, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":1,"model":"m","a":{"x" : [1, 2]},"text":"<b>&amp;</b>\u00e9"}`
	if got := string(o.Bytes()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	c := o.Clone()
	c.Set("model", json.RawMessage(`"n"`))
	c.Set("new", json.RawMessage(`true`))
	if got := string(c.Bytes()); got != `{"z":1,"model":"n","a":{"x" : [1, 2]},"text":"<b>&amp;</b>\u00e9","new":true}` {
		t.Errorf("after Set: %s", got)
	}
	if string(o.Get("model")) != `"m"` {
		t.Error("Set on the clone changed the original")
	}
	if !o.Has("a") || o.Has("absent") {
		t.Error("Has")
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `"s"`, `{"a":1} {}`, `{"a":}`, `{"a":1`} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrNotObject) {
			t.Errorf("Parse(%q) = %v, want ErrNotObject", in, err)
		}
	}
}

func TestArrayAndMarshal(t *testing.T) {
	if got := string(Array([]json.RawMessage{json.RawMessage(`1`), json.RawMessage(`{"a" : 2}`)})); got != `[1,{"a" : 2}]` {
		t.Errorf("Array = %s", got)
	}
	if got := string(Array(nil)); got != `[]` {
		t.Errorf("Array(nil) = %s", got)
	}
	b, err := Marshal(map[string]string{"t": "<a & b>"})
	if err != nil || string(b) != `{"t":"<a & b>"}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}

// TestDelete: a member deleted leaves the object, the others keep their
// bytes and order; deleting an absent member changes nothing.
func TestDelete(t *testing.T) {
	o, err := Parse([]byte(`{"type":"message", "id" : "msg_1","content":[ 1, 2 ]}`))
	if err != nil {
		t.Fatal(err)
	}
	o.Delete("id")
	o.Delete("absent")
	if got := string(o.Bytes()); got != `{"type":"message","content":[ 1, 2 ]}` {
		t.Errorf("after Delete: %s", got)
	}
	if o.Get("id") != nil {
		t.Error("Get after Delete")
	}
}
