package wirehdr

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

// TestWriteMatchesNetHTTP parses what Write and http.Header.Write produce
// and compares the fields a reader sees.
func TestWriteMatchesNetHTTP(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
	}{
		{"plain", http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}},
		{"several values", http.Header{"Set-Cookie": {"a=1", "b=2"}, "Vary": {"Origin", "Accept"}}},
		{"newlines and padding", http.Header{"X-Evil": {"a\r\nInjected: yes"}, "X-Padded": {" \tv  "}, "X-Lf": {"a\nb"}}},
		{"invalid names dropped", http.Header{"Bad Name": {"x"}, "Bad:Name": {"x"}, "": {"x"}, "Ok": {"y"}, "Bad\r\nName": {"z"}}},
		{"empty value", http.Header{"X-Empty": {""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ours, theirs bytes.Buffer
			bw := bufio.NewWriter(&ours)
			err := Write(bw, tt.h, nil)
			bw.Flush()
			if wantErr := tt.name == "invalid names dropped"; (err != nil) != wantErr {
				t.Fatalf("Write error %v, want one: %v", err, wantErr)
			}
			if err := tt.h.Write(&theirs); err != nil {
				t.Fatal(err)
			}
			got, want := read(t, ours.String()), read(t, theirs.String())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fields\n%v\nwant (http.Header.Write)\n%v\nwire:\n%q", got, want, ours.String())
			}
		})
	}
}

func TestWriteSkips(t *testing.T) {
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	Write(bw, http.Header{"Keep": {"1"}, "Drop": {"2"}}, func(k string) bool { return k == "Drop" })
	bw.Flush()
	if got := b.String(); got != "Keep: 1\r\n" {
		t.Fatalf("wrote %q", got)
	}
}

func read(t *testing.T, wire string) textproto.MIMEHeader {
	t.Helper()
	h, err := textproto.NewReader(bufio.NewReader(strings.NewReader(wire + "\r\n"))).ReadMIMEHeader()
	if err != nil {
		t.Fatalf("read %q: %v", wire, err)
	}
	return h
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{
		"Content-Type": true, "X-A_b.c~!#$%&'*+^`|": true,
		"": false, "a b": false, "a:b": false, "a\tb": false, "a\x7fb": false, "é": false, "(x)": false, "a/b": false,
	} {
		if ValidName(name) != ok {
			t.Errorf("ValidName(%q) = %v", name, !ok)
		}
	}
}
