package tokens

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/bench/pathological"
	"github.com/memgate/memgate/internal/memory"
)

// diffCorpus gathers chat messages: the pathological corpus's, every
// message object in the repository's testdata, hand-written malformed
// ones, and random ones with fields of every JSON type.
func diffCorpus(t *testing.T) []json.RawMessage {
	var out []json.RawMessage
	for _, in := range pathological.Inputs() {
		var body struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(in.Body, &body); err != nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
		out = append(out, body.Messages...)
	}
	// Message objects (anything with a role) and texts in testdata.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["role"]; ok {
				b, _ := json.Marshal(v)
				out = append(out, b)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			if len(v) > 0 && len(v) < 4096 {
				b, _ := json.Marshal(map[string]any{"role": "user", "content": v})
				out = append(out, b)
			}
		}
	}
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || path == "../../internal/encoder") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.Contains(filepath.ToSlash(path), "/testdata/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) > 4<<20 {
			return err
		}
		files++
		var v any
		if json.Unmarshal(b, &v) == nil {
			walk(v)
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "data: ")
			if json.Unmarshal([]byte(line), &v) == nil {
				walk(v)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("testdata: %d files, %v", files, err)
	}
	for _, s := range []string{
		``, `null`, `"hi"`, `42`, `[1,2]`, `not json`, `{}`, `{"role":""}`, `{"content":"no role"}`,
		`{"role":"user","content":42}`, `{"role":"user","content":{"a":1}}`, `{"role":"user","content":true}`,
		`{"role":"user","content":"esc \"q\" \u00e9\n"}`, `{"role":"user","content":[]}`,
		`{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"}]}`,
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"low"}},{"type":"input_image","detail":"low"}]}`,
		`{"role":"user","content":[{"type":"text","text":5}]}`, `{"role":"user","content":[{"type":"refusal","refusal":7}]}`,
		`{"role":"user","content":[{"type":"refusal","refusal":"no"},{"type":"file"},{"type":"input_audio"}]}`,
		`{"role":"assistant","function_call":"x"}`, `{"role":"assistant","function_call":null}`, `{"role":"assistant","function_call":{}}`,
		`{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}`, `{"role":"assistant","function_call":{"name":1}}`,
		`{"role":"assistant","tool_calls":[{"id":5,"type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"assistant","tool_calls":[{"id":"c","type":7,"function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}`,
		`{"role":"assistant","tool_calls":"x"}`, `{"role":"assistant","tool_calls":null}`, `{"role":"assistant","tool_calls":[]}`,
		`{"role":"assistant","tool_calls":[null]}`, `{"role":"assistant","tool_calls":[{}]}`,
		`{"role":"assistant","content":null,"refusal":"I can't."}`, `{"role":"assistant","refusal":3}`,
		`{"role":"user","name":7,"content":"x"}`, `{"role":"user","name":"","content":"x"}`,
		`{"role":"tool","tool_call_id":9,"content":"x"}`, `{"ROLE":"user","Content":"case"}`,
		`{"role":"user","content":"a","content":"bb"}`, `{"role":"user","content":"a","content":5}`,
		` {"role":"user","content":"spaced"} `, `{"role":"user","content":"x"} trailing`,
		"{\"role\":\"user\",\"content\":\"bad \xff\xfe utf8\"}", "{\"role\":\"user\",\"content\":\"bad \xff and \\\"escaped\\\"\"}",
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\x28\"}],\"name\":\"\xff\"}",
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"f\xff\",\"arguments\":\"\xed\xa0\x80\"}}]}",
	} {
		out = append(out, json.RawMessage(s))
	}
	r := rand.New(rand.NewPCG(31, 32))
	for range 5000 {
		out = append(out, randomMessage(r))
	}
	return out
}

// randomMessage is a chat message whose fields are, at random, absent,
// null, of the right type, or of another.
func randomMessage(r *rand.Rand) json.RawMessage {
	texts := []string{"hello", "", "Olá, São Paulo", "line\nbreak \"quoted\" \\ back", "日本語 🎉", "<|endoftext|>", strings.Repeat("ab ", 40)}
	text := func() string { return texts[r.IntN(len(texts))] }
	oneOf := func(vs ...func() any) any { return vs[r.IntN(len(vs))]() }
	str := func() any { return text() }
	num := func() any { return r.IntN(100) }
	null := func() any { return nil }
	obj := func() any { return map[string]any{"x": text()} }
	part := func() any {
		p := map[string]any{}
		if r.IntN(8) > 0 {
			p["type"] = oneOf(func() any {
				return []string{"text", "input_text", "output_text", "refusal", "image_url", "input_image", "input_audio", "file", ""}[r.IntN(9)]
			}, num)
		}
		if r.IntN(2) == 0 {
			p["text"] = oneOf(str, str, str, num, null)
		}
		if r.IntN(4) == 0 {
			p["refusal"] = oneOf(str, str, num)
		}
		if r.IntN(3) == 0 {
			p["image_url"] = oneOf(func() any {
				return map[string]any{"url": "u", "detail": []string{"low", "high", "auto", ""}[r.IntN(4)]}
			}, func() any { return map[string]any{"url": "u"} }, str, func() any { return map[string]any{"detail": 5} })
		}
		if r.IntN(4) == 0 {
			p["detail"] = oneOf(func() any { return []string{"low", "high"}[r.IntN(2)] }, num)
		}
		return p
	}
	fn := func() any {
		f := map[string]any{}
		if r.IntN(6) > 0 {
			f["name"] = oneOf(str, str, str, num)
		}
		if r.IntN(6) > 0 {
			f["arguments"] = oneOf(str, str, str, obj)
		}
		return f
	}
	m := map[string]any{}
	set := func(k string, p int, v func() any) {
		if r.IntN(p) == 0 {
			m[k] = v()
		}
	}
	set("role", 1, func() any {
		if r.IntN(12) == 0 {
			return oneOf(num, null, func() any { return "" })
		}
		return []string{"user", "assistant", "system", "tool", "developer", "function"}[r.IntN(6)]
	})
	if r.IntN(10) == 0 {
		delete(m, "role")
	}
	set("content", 1, func() any {
		return oneOf(str, str, str, null, num, obj, func() any {
			n := r.IntN(4)
			ps := make([]any, n)
			for i := range ps {
				ps[i] = part()
			}
			return ps
		})
	})
	set("name", 4, func() any { return oneOf(str, str, num, null) })
	set("refusal", 5, func() any { return oneOf(str, str, null, num) })
	set("tool_call_id", 5, func() any { return oneOf(str, str, num) })
	set("tool_calls", 3, func() any {
		return oneOf(null, str, func() any {
			n := r.IntN(4)
			cs := make([]any, n)
			for i := range cs {
				c := map[string]any{"function": fn()}
				if r.IntN(4) > 0 {
					c["id"] = oneOf(str, str, str, num, null)
				}
				if r.IntN(4) > 0 {
					c["type"] = oneOf(func() any { return "function" }, num, null)
				}
				if r.IntN(15) == 0 {
					c["function"] = oneOf(str, null, num)
				}
				cs[i] = c
			}
			return cs
		})
	})
	set("function_call", 6, func() any { return oneOf(fn, null, str) })
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestCountsFromParsedMessages: over the corpus, a message counts the
// same from its JSON (RawMessage), from what memory.ParseMessage kept of
// it (Message) and from a copy without it (Message of Bare: Raw decoded
// again), and HasToolCalls answers the same from what ParseMessage kept
// and from Raw. (When tokens counted with a decoder of its own, this
// corpus showed identical counts with both decoders before it went.)
func TestCountsFromParsedMessages(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	corpus := diffCorpus(t)
	parsed, malformed := 0, 0
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		for i, raw := range corpus {
			want := c.RawMessage(model, raw)
			if want < PerMessage {
				t.Fatalf("%s: message %d %s: RawMessage = %d, less than PerMessage", model, i, clip(raw), want)
			}
			if memory.Decode(raw).Malformed {
				malformed++
			}
			m, err := memory.ParseMessage(raw)
			if err != nil {
				continue
			}
			parsed++
			if got := c.Message(model, m); got != want {
				t.Fatalf("%s: message %d %s: Message = %d, RawMessage %d", model, i, clip(raw), got, want)
			}
			bare := m.Bare()
			bare.Raw = append(json.RawMessage(nil), raw...) // other bytes: read again
			if got := c.Message(model, bare); got != want {
				t.Fatalf("%s: message %d %s: Message of a copy = %d, RawMessage %d", model, i, clip(raw), got, want)
			}
			if got, fromRaw := m.HasToolCalls(), bare.HasToolCalls(); got != fromRaw {
				t.Fatalf("message %d %s: HasToolCalls = %v, from Raw %v", i, clip(raw), got, fromRaw)
			}
		}
	}
	t.Logf("%d messages, %d parsed, %d malformed (two models)", len(corpus), parsed, malformed)
	if parsed == 0 || malformed == 0 {
		t.Fatal("the corpus misses valid or malformed messages")
	}
}

func clip(raw []byte) string {
	if len(raw) > 200 {
		return fmt.Sprintf("%s… (%d bytes)", raw[:200], len(raw))
	}
	return string(raw)
}
