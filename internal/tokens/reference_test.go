package tokens_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/tokens"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// reference returns tiktoken-go's encoders, the oracle the hand-written
// pre-tokenizer is checked against. tiktoken-go keeps its loader in a
// package global, hence the Once.
var reference = sync.OnceValues(func() (map[string]*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	m := map[string]*tiktoken.Tiktoken{}
	for _, name := range []string{tokens.O200kBase, tokens.CL100kBase} {
		enc, err := tiktoken.GetEncoding(name)
		if err != nil {
			return nil, err
		}
		m[name] = enc
	}
	return m, nil
})

func mustReference(tb testing.TB) map[string]*tiktoken.Tiktoken {
	tb.Helper()
	ref, err := reference()
	if err != nil {
		tb.Fatalf("tiktoken-go: %v", err)
	}
	return ref
}

// models picks one model per encoding.
var models = map[string]string{tokens.O200kBase: "gpt-4o", tokens.CL100kBase: "gpt-4"}

// checkAgainstReference fails when the Counter and tiktoken-go disagree on s.
func checkAgainstReference(t *testing.T, c *tokens.Counter, ref map[string]*tiktoken.Tiktoken, s string) {
	t.Helper()
	for name, model := range models {
		want := len(ref[name].EncodeOrdinary(s))
		if got := c.Text(model, s); got != want {
			t.Errorf("%s: %q: %d tokens, tiktoken-go says %d", name, s, got, want)
		}
	}
}

// Edge cases of the pre-tokenizer: contractions, prefixes, digit groups,
// whitespace runs before newlines and letters, marks, title case, CJK,
// invalid UTF-8.
var trickyStrings = []string{
	"Hello, world! It's 2024 and we're testing tiktoken's edge-cases.",
	"I'LL GO. You'Re 'quoted' 'S 'sounds' don't can't won't y'all ' s",
	"1234567 12.5% 3/4 1,000,000 v1.2.3 ٣٤٥٦ ⅧⅨ ²³",
	"line one\nline two\r\n\r\n  indented\n\n\n\t\ttabs  \n   \n",
	"   leading spaces and trailing spaces   ",
	"a  b   c    d\u00a0e\u2003f\u0085g\u2028h",
	"café naïve résumé Ångström e\u0301 a\u0308\u0301b",
	"ǅungla ǈubljana ʰʲʷ ᵃᵇ McDonald's iPhone eBay HTTPServer XMLHttpRequest",
	"日本語のテキスト、中文文本。한국어 텍스트 العربية עברית हिन्दी ไทย",
	"emoji 🎉🚀 👩‍👩‍👧 flags 🇫🇷 ✔️",
	"func main() {\n\tfmt.Println(\"hi\") // comment\n}\n",
	"https://example.com/path/to?x=1&y=2#frag //// /// //\n/**/",
	"<|endoftext|> <|im_start|>user\nhi<|im_end|>",
	"!!!???...---___***   ...\n\n...",
	"\x80\xff invalid \xc3( utf8 \xe2\x82",
	"'", "''", "'s", " 's", "\n's", "a'", "A'S'T", "'\u0301s", "\u0301", "\u0301\u0301a", " \u0301", "\t",
	"\r", "\n", " ", "  ", " \n ", "x\r\ny", "1", "1234", "a1b2c3",
	strings.Repeat("abcdefghij", 40),
	strings.Repeat("\u0301", 70) + "z",
	strings.Repeat("ñ", 100) + strings.Repeat("/", 90),
}

func TestMatchesTiktokenGo(t *testing.T) {
	c := mustCounter(t, nil)
	ref := mustReference(t)
	for _, s := range trickyStrings {
		checkAgainstReference(t, c, ref, s)
	}
}

// Random strings drawn from the characters the pre-tokenizer distinguishes.
func TestMatchesTiktokenGoRandom(t *testing.T) {
	c := mustCounter(t, nil)
	ref := mustReference(t)
	alphabet := []string{
		"a", "Z", "e", "s", "t", "re", "ll", "'", "'", "’", " ", " ", "  ", "\n", "\r", "\t", "\u00a0", "\u2003",
		"0", "7", "٣", "Ⅷ", ".", ",", "/", "-", "!", "(", "\u0301", "\u0308", "ʰ", "ǅ", "中", "テ", "é", "Ä",
		"🎉", "\u200d", "\x80", "_", "$", "<|endoftext|>",
	}
	r := rand.New(rand.NewPCG(7, 11))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		var b strings.Builder
		for range 1 + r.IntN(24) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		checkAgainstReference(t, c, ref, b.String())
		if t.Failed() {
			return
		}
	}
}

func FuzzMatchesTiktokenGo(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	c := mustCounter(f, nil)
	ref := mustReference(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkAgainstReference(t, c, ref, s)
	})
}

// Long pieces (longer than the scanning merge's limit, so merged with the
// heap): runs of one character class and random letters, against
// tiktoken-go.
func TestMatchesTiktokenGoLongPieces(t *testing.T) {
	c := mustCounter(t, nil)
	ref := mustReference(t)
	r := rand.New(rand.NewPCG(3, 5))
	randomFrom := func(alphabet []string, n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	lower := strings.Split("abcdefghijklmnopqrstuvwxyz", "")
	texts := []string{
		strings.Repeat("a", 65), strings.Repeat("a", 1000), strings.Repeat(" ", 300), strings.Repeat("!", 257),
		strings.Repeat("ab", 400), strings.Repeat("日本語", 100), strings.Repeat("🎉", 80), strings.Repeat("eyJ-", 200),
		"x" + strings.Repeat("\u0301", 200), strings.Repeat("Ab", 150), strings.Repeat("ABC", 120),
		strings.Repeat("\t \n", 100) + "z", strings.Repeat("{\"a\":[", 60),
	}
	n := 60
	if testing.Short() {
		n = 10
	}
	for range n {
		texts = append(texts, randomFrom(lower, 65+r.IntN(1500)))
		texts = append(texts, randomFrom([]string{"a", "é", "Z", "ñ", "中", "ʰ", "\u0301"}, 65+r.IntN(600)))
		texts = append(texts, randomFrom([]string{"!", "?", ".", "-", "_", "*", "(", "/"}, 65+r.IntN(600)))
	}
	for _, s := range texts {
		checkAgainstReference(t, c, ref, s)
		if t.Failed() {
			return
		}
	}
}
