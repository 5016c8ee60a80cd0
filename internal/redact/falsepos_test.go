package redact_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/eval/synth"
	"github.com/memgate/memgate/internal/redact"
)

// The false-positive measurement: ordinary chat text, with no secret in it,
// goes through the default Redactor and every message it alters is a false
// positive. It always measures the committed corpus (testdata/chat.txt,
// lines written for it, technical chat and talk about passwords included)
// and synthetic conversations (eval/synth), and fails on any alteration
// there but the known false positives listed below. MEMGATE_REDACT_CORPUS names more files to measure (comma-separated:
// LoCoMo's JSON, or text with one message a line); their rate is reported,
// not asserted:
//
//	MEMGATE_REDACT_CORPUS=/work/data/locomo10.json go test ./internal/redact -run TestFalsePositiveRate -v

// knownFalsePositives are the corpus lines the rules alter by design: a
// quoted word said to be "the password" is taken as one, movie trivia
// included, since "the wifi password is 'x'" must be redacted.
var knownFalsePositives = map[string]bool{
	`In the movie the secret password was "swordfish", so cheesy.`: true,
}

// fpStats counts the messages of a corpus and those the Redactor altered.
type fpStats struct {
	name              string
	messages, altered int
	examples          []string
}

func (s *fpStats) scan(r *redact.Redactor, text string) {
	s.messages++
	if got, n := r.String(text); n > 0 {
		s.altered++
		if len(s.examples) < 20 {
			s.examples = append(s.examples, fmt.Sprintf("%q\n      → %q", text, got))
		}
	}
}

func (s *fpStats) report(t *testing.T) {
	t.Helper()
	rate := 0.0
	if s.messages > 0 {
		rate = 100 * float64(s.altered) / float64(s.messages)
	}
	t.Logf("%s: %d messages scanned, %d altered (%.3f%%)", s.name, s.messages, s.altered, rate)
	for _, e := range s.examples {
		t.Logf("  %s", e)
	}
}

func TestFalsePositiveRate(t *testing.T) {
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	corpus := &fpStats{name: "testdata/chat.txt"}
	for _, line := range readLines(t, filepath.Join("testdata", "chat.txt")) {
		corpus.scan(r, line)
		_, n := r.String(line)
		if known := knownFalsePositives[line]; n > 0 && !known {
			t.Errorf("ordinary message altered: %q", line)
		} else if n == 0 && known {
			t.Errorf("known false positive no longer altered (update knownFalsePositives): %q", line)
		}
	}
	corpus.report(t)
	if corpus.messages < 200 {
		t.Errorf("committed corpus has %d messages", corpus.messages)
	}

	generated := &fpStats{name: "eval/synth, seeds 1-5"}
	for seed := uint64(1); seed <= 5; seed++ {
		c, err := synth.Generate(seed, "user", synth.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Sessions {
			for _, turn := range s.Turns {
				generated.scan(r, turn.Text)
			}
		}
	}
	generated.report(t)
	if generated.messages == 0 || generated.altered > 0 {
		t.Errorf("synthetic conversations: %d of %d messages altered", generated.altered, generated.messages)
	}

	for _, path := range strings.Split(os.Getenv("MEMGATE_REDACT_CORPUS"), ",") {
		if path = strings.TrimSpace(path); path == "" {
			continue
		}
		extra := &fpStats{name: path}
		for _, text := range corpusMessages(t, path) {
			extra.scan(r, text)
		}
		extra.report(t)
	}
}

// readLines returns the lines of a text corpus, without comments and blank
// lines, with "\n" turned into line breaks.
func readLines(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.ReplaceAll(line, `\n`, "\n"))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// corpusMessages returns the messages of a corpus file: the "text" of every
// turn of LoCoMo-shaped JSON (a list of samples whose "conversation" maps
// sessions to turns), or the lines of a text file.
func corpusMessages(tb testing.TB, path string) []string {
	tb.Helper()
	if !strings.HasSuffix(path, ".json") {
		return readLines(tb, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var samples []struct {
		Conversation map[string]json.RawMessage `json:"conversation"`
	}
	if err := json.Unmarshal(raw, &samples); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, s := range samples {
		for _, v := range s.Conversation {
			var turns []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(v, &turns) != nil {
				continue // speaker names and session dates
			}
			for _, turn := range turns {
				out = append(out, turn.Text)
			}
		}
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no turns found", path)
	}
	return out
}
