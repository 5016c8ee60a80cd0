package wirehdr

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParseFields(t *testing.T) {
	tests := []struct {
		name  string
		block string
		want  http.Header // nil: not taken
	}{
		{"canonical names, trimmed values", "content-type:  a/b \r\nX-ID:\t1\r\n", http.Header{"Content-Type": {"a/b"}, "X-Id": {"1"}}},
		{"repeated field", "Vary: a\r\nVary: b\r\n", http.Header{"Vary": {"a", "b"}}},
		{"repeats among names of one length", "X-A: 1\r\nX-B: 2\r\nx-a: 3\r\nX-C:\r\nX-C: 4\r\nX-A: 5\r\n",
			http.Header{"X-A": {"1", "3", "5"}, "X-B": {"2"}, "X-C": {"", "4"}}},
		{"names 64 bytes apart in length", "A: 1\r\n" + strings.Repeat("b", 65) + ": 2\r\nA: 3\r\n",
			http.Header{"A": {"1", "3"}, "B" + strings.Repeat("b", 64): {"2"}}},
		{"second pragma only", "Pragma: x\r\nPragma: no-cache\r\n", http.Header{"Pragma": {"x", "no-cache"}}},
		{"empty value", "X-E:\r\n", http.Header{"X-E": {""}}},
		{"pragma", "Pragma: no-cache\r\n", http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}}},
		{"no fields", "", http.Header{}},
		{"space before colon", "X-A : 1\r\n", nil},
		{"no colon", "X-A 1\r\n", nil},
		{"folded", "X-A: 1\r\n 2\r\n", nil},
		{"bare LF", "X-A: 1\n", nil},
		{"control byte", "X-A: \x00\r\n", nil},
		{"too many", strings.Repeat("X-A: 1\r\n", maxFields+1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, ok := parseFields(tt.block)
			if ok != (tt.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tt.want != nil)
			}
			if ok && !reflect.DeepEqual(h, tt.want) {
				t.Fatalf("got %v, want %v", h, tt.want)
			}
		})
	}
}

func TestParseHead(t *testing.T) {
	tests := []struct {
		in     string
		ok     bool
		length int64
	}{
		{"POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\nbody", true, 12},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true, -1},
		{"GET / HTTP/1.1\r\nHost: x\r\n", false, 0},
		{"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", false, 0},
		{"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", false, 0},
		{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", false, 0},
		{"POST / HTTP/1.1\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n", false, 0},
	}
	for _, tt := range tests {
		h, ok := ParseHead([]byte(tt.in))
		if ok != tt.ok || ok && (h.Length != tt.length || h.N != strings.Index(tt.in, "\r\n\r\n")+4 || h.StartLine != strings.SplitN(tt.in, "\r\n", 2)[0]) {
			t.Errorf("%q: got %+v, %v", tt.in, h, ok)
		}
	}
}

func TestHasToken(t *testing.T) {
	for v, want := range map[string]bool{"close": true, "keep-alive, Close ": true, "\tCLOSE": true, "closed": false, "": false, "keep-alive": false} {
		if HasToken([]string{v}, "close") != want {
			t.Errorf("HasToken(%q) = %v", v, !want)
		}
	}
}

func TestBody(t *testing.T) {
	b, err := io.ReadAll(Body(strings.NewReader("hello, world"), 5))
	if err != nil || string(b) != "hello" {
		t.Fatalf("got %q, %v", b, err)
	}
	b, err = io.ReadAll(Body(strings.NewReader("hel"), 5))
	if err != io.ErrUnexpectedEOF || string(b) != "hel" {
		t.Fatalf("short body: got %q, %v; want unexpected EOF", b, err)
	}
	if Body(strings.NewReader("x"), 0) != http.NoBody {
		t.Fatal("an empty body is not http.NoBody")
	}
}

func TestValue(t *testing.T) {
	h := http.Header{"X-A": {"1", "2"}, "X-Empty": {}}
	for k, want := range map[string]string{"X-A": "1", "X-Empty": "", "X-Missing": ""} {
		if got := Value(h, k); got != want {
			t.Errorf("Value(%q) = %q, want %q", k, got, want)
		}
	}
}
