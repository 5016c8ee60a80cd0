package ranking

import "testing"

func TestBM25(t *testing.T) {
	if idf := BM25IDF(10, 9); idf != 1e-6 {
		t.Fatalf("BM25IDF of a term in most documents = %v, want FTS5's floor 1e-6", idf)
	}
	if a, b := BM25(1, 1, 10, 10), BM25(1, 2, 10, 10); !(b > a && a > 0) {
		t.Fatalf("BM25 = %v then %v: a second occurrence must add", a, b)
	}
	if long, short := BM25(1, 1, 20, 10), BM25(1, 1, 5, 10); !(short > long) {
		t.Fatalf("BM25 long %v short %v: a shorter document must score higher", long, short)
	}
}
