package recall

import (
	"context"
	"hash/fnv"
	"math"
	"testing"
	"time"
)

func embedOne(t *testing.T, l *Local, s string) []float32 {
	t.Helper()
	v, err := l.Embed(context.Background(), []string{s}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func TestLocalDeterministicAndNormalised(t *testing.T) {
	l := NewLocal(384)
	a, b := embedOne(t, l, "I am vegetarian and live in Lisbon"), embedOne(t, l, "I am vegetarian and live in Lisbon")
	if len(a) != 384 {
		t.Fatalf("dims = %d", len(a))
	}
	var norm float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("not deterministic")
		}
		norm += float64(a[i]) * float64(a[i])
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Fatalf("norm = %v", norm)
	}
	if z := embedOne(t, l, "!!!"); Cosine(z, z) != 0 {
		t.Fatal("empty text should embed to the zero vector")
	}
}

// TestLocalRanksOverlapAboveUnrelated documents what the local embedder can
// match: shared words and inflections rank above unrelated text.
func TestLocalRanksOverlapAboveUnrelated(t *testing.T) {
	l := NewLocal(384)
	tests := []struct{ query, related, unrelated string }{
		{"any vegetarian dinner ideas?", "I am vegetarian since 2019", "my car needs new tyres"},
		{"where do I live, Lisbon or Porto?", "I moved to Porto in May", "the meeting is on Tuesday"},
		{"quanto quero economizar?", "quero economizar R$ 5.000 até junho", "gosto de futebol aos domingos"},
		{"vegetarians", "vegetarian", "mechanic"},
	}
	for _, tt := range tests {
		q := embedOne(t, l, tt.query)
		rel, unrel := Cosine(q, embedOne(t, l, tt.related)), Cosine(q, embedOne(t, l, tt.unrelated))
		if rel <= unrel {
			t.Errorf("%q: related %.3f <= unrelated %.3f", tt.query, rel, unrel)
		}
	}
}

// TestLocalMatchesConcepts documents what the WordNet concepts add: a
// question in general words ranks a statement in specific ones above an
// unrelated statement, though they share no word.
func TestLocalMatchesConcepts(t *testing.T) {
	l := NewLocal(384)
	tests := []struct{ query, related, unrelated string }{
		{"which musical instrument does she play?", "I've been practising the viola", "the meeting moved to Thursday"},
		{"what is the profession of his sibling?", "my sister just got hired as a pharmacist", "we painted the kitchen blue"},
		{"what breed of animal lives with them?", "we adopted a rescue greyhound", "the train was late again"},
		{"who is her spouse?", "her husband works nights", "the garden needs water"},
		{"what vehicle did he buy?", "he finally bought a car", "she started a pottery class"},
		{"favourite beverage", "I drink oolong every morning", "my knee hurts when I run"},
	}
	for _, tt := range tests {
		q := embedOne(t, l, tt.query)
		rel, unrel := Cosine(q, embedOne(t, l, tt.related)), Cosine(q, embedOne(t, l, tt.unrelated))
		if rel <= unrel {
			t.Errorf("%q: related %.3f <= unrelated %.3f", tt.query, rel, unrel)
		}
	}
	if l.Model() != LocalModel {
		t.Fatalf("Model() = %q, want %q", l.Model(), LocalModel)
	}
	// Without the lexicon the same pairs share nothing, and the vectors
	// carry the v1 name: reindex tells the two apart.
	bare := &Local{dims: 384}
	if bare.Model() == LocalModel {
		t.Fatal("an embedder without the lexicon reports the lexicon model")
	}
	q := embedOne(t, bare, "which musical instrument does she play?")
	if c := Cosine(q, embedOne(t, bare, "I've been practising the viola")); c > 0.1 {
		t.Errorf("surface features alone score the paraphrase %.3f", c)
	}
}

func TestHashIsFNV1a(t *testing.T) {
	for _, parts := range [][4]string{{"w:", "viola", "", ""}, {"b:", "rescue", " ", "greyhound"}, {"", "", "", ""}, {"c:", "^vi", "", ""}} {
		h := fnv.New64a()
		h.Write([]byte(parts[0] + parts[1] + parts[2] + parts[3]))
		if got, want := hash(parts[0], parts[1], parts[2], parts[3]), h.Sum64(); got != want {
			t.Errorf("hash(%q) = %x, want %x", parts, got, want)
		}
	}
}

func BenchmarkLocalEmbed(b *testing.B) {
	l := NewLocal(384)
	text := []string{"I want to save R$ 5.000 by June, and remind me if the rent goes above 1,200 euros a month."}
	b.SetBytes(int64(len(text[0])))
	for b.Loop() {
		l.Embed(context.Background(), text, time.Time{})
	}
}
