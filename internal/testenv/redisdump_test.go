package testenv

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisAtRestSeesCompressedText: the text of a compressible string,
// and of a stream entry deleted from a node that still holds others, is
// found in RedisAtRest's result with the server's rdbcompression on (its
// default), and a string overwritten is not.
func TestRedisAtRestSeesCompressedText(t *testing.T) {
	ctx := context.Background()
	opts, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	prefix := RedisPrefix(t)
	value := func(needle string) string {
		return strings.Repeat("compressible filler, ", 40) + needle + strings.Repeat(" more filler", 40)
	}
	if err := c.Set(ctx, prefix+"s", value("needle-0x5EC2E7-string"), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, prefix+"gone", value("needle-0x5EC2E7-overwritten"), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, prefix+"gone", "replaced", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "x", Values: []any{"p", value(fmt.Sprint("needle-0x5EC2E7-entry-", i))}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := c.XDel(ctx, prefix+"x", ids[1]).Err(); err != nil {
		t.Fatal(err)
	}
	got := RedisAtRest(t, c, prefix)
	for _, needle := range []string{"needle-0x5EC2E7-string", "needle-0x5EC2E7-entry-1"} {
		if !bytes.Contains(got, []byte(needle)) {
			t.Errorf("%s not found at rest", needle)
		}
	}
	if bytes.Contains(got, []byte("needle-0x5EC2E7-overwritten")) {
		t.Error("an overwritten value found at rest")
	}
}

// TestLZFDecompress: liblzf blocks expand; malformed ones are refused.
func TestLZFDecompress(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		n    int
		want string
		ok   bool
	}{
		{"literal", []byte{2, 'a', 'b', 'c'}, 3, "abc", true},
		{"back reference", []byte{0, 'a', 0x20, 0}, 4, "aaaa", true}, // 1 literal, then 3 bytes from 1 back
		{"long back reference", []byte{1, 'a', 'b', 0xE0, 1, 1}, 12, "ababababab" + "ab", true},
		{"truncated literal", []byte{5, 'a'}, 6, "", false},
		{"reference before start", []byte{0x20, 0}, 3, "", false},
		{"wrong length", []byte{2, 'a', 'b', 'c'}, 4, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := lzfDecompress(tt.in, tt.n)
			if ok != tt.ok || (ok && string(got) != tt.want) {
				t.Fatalf("lzfDecompress = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
