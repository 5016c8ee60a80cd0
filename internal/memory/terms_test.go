package memory

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestQueryTerms(t *testing.T) {
	tests := []struct {
		text string
		max  int
		want []string
	}{
		{"Where do I live? Lisbon!", 10, []string{"where", "live", "lisbon"}},
		{"the THE the", 10, []string{"the"}},                                       // only stopwords: kept
		{`"vegetarian" OR (NOT meat)*`, 10, []string{"vegetarian", "not", "meat"}}, // operators are just punctuation
		{"olá, São Paulo", 10, []string{"olá", "são", "paulo"}},
		{"one two three", 2, []string{"one", "two"}},
		{"?!", 10, nil},
	}
	for _, tt := range tests {
		if got := QueryTerms(tt.text, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("QueryTerms(%q, %d) = %q, want %q", tt.text, tt.max, got, tt.want)
		}
	}
}

func TestQueryStopwords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"What did Caroline say about the lake?", []string{"what", "did", "say", "about", "the"}},
		{"what is it", nil}, // stopwords alone: none left out
		{"Lisbon", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := QueryStopwords(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("QueryStopwords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestQueryTermsOfAHugeText: a question of megabytes (a 2 MiB message is
// its own query: recall reads its terms three times on the request path)
// is read only as far as its first max terms, not copied lower-cased and
// split whole; QueryStopwords reads it without copying it. Both answer
// as for its words alone.
func TestQueryTermsOfAHugeText(t *testing.T) {
	var b strings.Builder
	b.WriteString("What did THE Vet say about Bruno's diet? ")
	for i := 0; b.Len() < 2<<20; i++ {
		b.WriteString("Word")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" the ")
	}
	huge := b.String()
	var got []string
	if n := allocated(func() { got = QueryTerms(huge, 64) }); n > 64<<10 {
		t.Errorf("QueryTerms allocated %d bytes for a %d-byte text, want it to read only its first terms", n, len(huge))
	}
	want := []string{"vet", "bruno", "s", "diet"}
	for i := 0; len(want) < 64; i++ {
		want = append(want, "word"+strconv.Itoa(i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("QueryTerms = %q, want %q", got, want)
	}
	var stop []string
	if n := allocated(func() { stop = QueryStopwords(huge) }); n > 64<<10 {
		t.Errorf("QueryStopwords allocated %d bytes for a %d-byte text", n, len(huge))
	}
	if want := []string{"what", "did", "the", "say", "about"}; !slices.Equal(stop, want) {
		t.Errorf("QueryStopwords = %q, want %q", stop, want)
	}
}
