package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

var validJSONCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a":1,}`, `{"a" : [1, 2 ,3 ] }`, `{"a"}`, `{"a":}`, `{:1}`,
	`{1:1}`, `{"a":1 "b":2}`, `[1,]`, `[,1]`, `[1 2]`, `[[[]]]`, `[[[]]`, `[]]`, `{}}`, `{}{}`, `1 2`,
	`"abc"`, `"a\"b"`, `"\u00e9\uD83D\uDE00"`, `"\u00g0"`, `"\u00e"`, `"\x"`, `"\/\b\f\n\r\t\\"`, "\"a\x01\"",
	"\"a\x7f\xff\xfe\"", `"abc`, `"abc\`, `'a'`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.0e-0`, `+1`, `1.5.5`, `0x10`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `[true,false,null]`, `{"a":nullx}`,
	"\t\n\r 1 \t\n\r", "\v1", "\u00a01",
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"temperature":0.2}`,
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validJSONCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func TestValidJSONNestingLimit(t *testing.T) {
	for _, depth := range []int{63, 64, 65, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			closer := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth))
			if got, want := validJSON(doc), json.Valid(doc); got != want {
				t.Errorf("depth %d of %q: validJSON = %v, encoding/json says %v", depth, open, got, want)
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	body := []byte(benchBody)
	for _, bc := range []struct {
		name  string
		valid func([]byte) bool
	}{{"memgate", validJSON}, {"encoding-json", json.Valid}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !bc.valid(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
