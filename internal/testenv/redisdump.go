package testenv

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisAtRest returns what Redis holds for every key starting with
// prefix, as DUMP serialises it (the form Redis writes to its RDB
// snapshots): a stream's nodes with their deleted entries included, which
// no read command shows. Strings Redis compressed with LZF are appended
// expanded, so that a test can search the result for plain text whatever
// the server's rdbcompression setting.
func RedisAtRest(tb testing.TB, c redis.UniversalClient, prefix string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	var all []byte
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 500).Iterator()
	for iter.Next(ctx) {
		dump, err := c.Dump(ctx, iter.Val()).Result()
		if err == redis.Nil {
			continue // deleted since the scan
		}
		if err != nil {
			tb.Fatalf("testenv: DUMP %s: %v", iter.Val(), err)
		}
		all = append(all, dump...)
		all = append(all, expandLZF([]byte(dump))...)
	}
	if err := iter.Err(); err != nil {
		tb.Fatalf("testenv: SCAN %s*: %v", prefix, err)
	}
	return all
}

// expandLZF returns the expansion of every LZF-compressed string in an
// RDB serialisation: the bytes after each 0xC3 marker that parse as
// compressed length, length and an LZF block of those lengths. It does
// not parse the serialisation: a 0xC3 that is data yields nothing or a
// few bytes of noise, which a search for text tolerates.
func expandLZF(dump []byte) []byte {
	var out []byte
	for i := range dump {
		if dump[i] != 0xC3 {
			continue
		}
		clen, n := rdbLen(dump[i+1:])
		if n == 0 {
			continue
		}
		ulen, m := rdbLen(dump[i+1+n:])
		start := i + 1 + n + m
		if m == 0 || clen == 0 || ulen == 0 || clen > uint64(len(dump)-start) || ulen > 1<<26 {
			continue
		}
		if plain, ok := lzfDecompress(dump[start:start+int(clen)], int(ulen)); ok {
			out = append(out, plain...)
		}
	}
	return out
}

// rdbLen decodes an RDB length at the start of b and returns it with the
// bytes it took (0: not a plain length).
func rdbLen(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	switch b[0] >> 6 {
	case 0:
		return uint64(b[0] & 0x3f), 1
	case 1:
		if len(b) < 2 {
			return 0, 0
		}
		return uint64(b[0]&0x3f)<<8 | uint64(b[1]), 2
	case 2:
		switch {
		case b[0] == 0x80 && len(b) >= 5:
			return uint64(binary.BigEndian.Uint32(b[1:5])), 5
		case b[0] == 0x81 && len(b) >= 9:
			return binary.BigEndian.Uint64(b[1:9]), 9
		}
	}
	return 0, 0
}

// lzfDecompress expands an LZF block (liblzf's format, which Redis
// uses) to n bytes; ok is false when in is not such a block.
func lzfDecompress(in []byte, n int) ([]byte, bool) {
	out := make([]byte, 0, n)
	for ip := 0; ip < len(in); {
		ctrl := int(in[ip])
		ip++
		if ctrl < 32 { // a literal run of ctrl+1 bytes
			run := ctrl + 1
			if ip+run > len(in) || len(out)+run > n {
				return nil, false
			}
			out = append(out, in[ip:ip+run]...)
			ip += run
			continue
		}
		length := ctrl >> 5 // a back reference
		if length == 7 {
			if ip >= len(in) {
				return nil, false
			}
			length += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, false
		}
		ref := len(out) - (ctrl&0x1f)<<8 - 1 - int(in[ip])
		ip++
		length += 2
		if ref < 0 || len(out)+length > n {
			return nil, false
		}
		for k := range length { // byte by byte: the reference may overlap
			out = append(out, out[ref+k])
		}
	}
	return out, len(out) == n
}
