package encoder

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadRejectsBrokenAssets: a truncated, garbled or foreign asset is an
// error, never a panic or a half-loaded model.
func TestLoadRejectsBrokenAssets(t *testing.T) {
	raw := mustGunzip(t, modelAsset)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	for name, asset := range map[string][]byte{
		"empty":         nil,
		"not gzip":      []byte("memgate-use-lite 1\n"),
		"bad magic":     gz(append([]byte("memgate-use-lite 9\n"), raw[len(AssetMagic):]...)),
		"truncated":     gz(raw[:len(raw)/2]),
		"header only":   gz(raw[:len(AssetMagic)+4]),
		"trailing data": gz(append(bytes.Clone(raw), 0)),
	} {
		if _, err := Load(asset); !errors.Is(err, errAsset) {
			t.Errorf("%s: Load err = %v, want errAsset", name, err)
		}
	}
}

func mustGunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestEmbedAnyInput: whatever the text (huge, invalid UTF-8, control
// characters, only unknown characters), the vector is a finite unit vector
// of Dims dimensions, and a huge text costs no more pieces than the model
// reads.
func TestEmbedAnyInput(t *testing.T) {
	m := mustDefault(t)
	huge := strings.Repeat("memory gateway ", 200000) // 3 MB
	inputs := []string{huge, "\xff\xfe\xfd invalid", "\x00\x01\x02", "日本語日本語", strings.Repeat("🙂", 5000)}
	vecs, err := NewEmbedder(m).Embed(context.Background(), inputs, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		if len(v) != Dims {
			t.Fatalf("input %d: %d dims", i, len(v))
		}
		var ss float64
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("input %d: non-finite value", i)
			}
			ss += float64(x) * float64(x)
		}
		if math.Abs(ss-1) > 1e-4 {
			t.Fatalf("input %d: norm² %.6f, want 1", i, ss)
		}
	}
	if n := len(m.Tokenizer().Encode(huge)); n > maxInputRunes {
		t.Fatalf("a huge text gave %d pieces, more than the %d characters read", n, maxInputRunes)
	}
}

// TestEmbedderHonoursCancel: a cancelled call embeds nothing.
func TestEmbedderHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewEmbedder(mustDefault(t)).Embed(ctx, []string{"x"}, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestEmbedIgnoresEarlierCalls: a text's vector is the same, to the bit,
// alone, in a batch of any order, and after calls of other sizes: a call
// keeps nothing of another, and no text of a batch reaches another's
// pieces.
func TestEmbedIgnoresEarlierCalls(t *testing.T) {
	m := mustDefault(t)
	texts := []string{
		"my sister found a new job in Lisbon",
		"",
		strings.Repeat("a long message about the trip to the mountains ", 20),
		"OK",
		"we grabbed a bite after the interview went well",
	}
	alone := make([][]float32, len(texts))
	for i, s := range texts {
		alone[i] = m.Embed([]string{s})[0]
	}
	for _, tc := range []struct {
		name  string
		batch []int // indexes into texts
	}{
		{"all", []int{0, 1, 2, 3, 4}},
		{"reversed", []int{4, 3, 2, 1, 0}},
		{"long first", []int{2, 0}},
		{"empty between", []int{3, 1, 4}},
		{"one after a long batch", []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := make([]string, len(tc.batch))
			for i, j := range tc.batch {
				batch[i] = texts[j]
			}
			got := m.Embed(batch)
			for i, j := range tc.batch {
				if !slices.Equal(got[i], alone[j]) {
					t.Errorf("text %d in batch %v: vector differs from its own (cosine %.6f)", j, tc.batch, cosine(got[i], alone[j]))
				}
			}
		})
	}
}

// TestEmbedSameOnAnyCores: a call split over several goroutines gives the
// vectors of one computed alone, to the bit, for a short question, a text
// of MaxTokens pieces, and a batch of both.
func TestEmbedSameOnAnyCores(t *testing.T) {
	m := mustDefault(t)
	texts := []string{
		"Last spring my sister told me about the new job she had found in Lisbon, what was the company called again?",
		strings.Repeat("a long message about the trip to the mountains ", 20),
		"OK",
	}
	want := m.Embed(texts)
	for _, n := range []int{2, 3, 8} {
		for _, batch := range [][]int{{0}, {1}, {0, 1, 2}} {
			in := make([]string, len(batch))
			for i, j := range batch {
				in[i] = texts[j]
			}
			got := m.EmbedOn(in, n)
			for i, j := range batch {
				if !slices.Equal(got[i], want[j]) {
					t.Errorf("%d cores, text %d of batch %v: vector differs from one core's (cosine %.6f)", n, j, batch, cosine(got[i], want[j]))
				}
			}
		}
	}
}
