package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// aofInfo reads INFO persistence's aof_rewrites (rewrites done since the
// server started) and whether one is in progress.
func aofInfo(t *testing.T, rdb *redis.Client) (rewrites int, inProgress bool) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "aof_rewrites":
			rewrites, _ = strconv.Atoi(v)
		case "aof_rewrite_in_progress":
			inProgress = v != "0"
		}
	}
	return rewrites, inProgress
}

// filesHolding lists the files under dir that contain word.
func filesHolding(t *testing.T, dir, word string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil // removed since the walk listed it
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(word)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestErasureRewritesRedisAppendOnlyFile: with PostgreSQL and a Redis
// that keeps an append-only file (`appendonly yes`, Redis 7's
// appendonlydir of base and incremental files), a user's exchange passes
// through Redis (the enrichment stream), so its text is written to the
// file. Erasing the user has Redis rewrite the file, after which the text
// is in no file of Redis's directory.
func TestErasureRewritesRedisAppendOnlyFile(t *testing.T) {
	redisURL, dir := testenv.PrivateRedis(t, "--appendonly", "yes", "--rdbcompression", "no")
	rdb, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	info := redis.NewClient(rdb)
	t.Cleanup(func() { info.Close() })

	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "Noted."}))
	cfg := fmt.Sprintf("store:\n  driver: postgres\n  postgres_url: %q\n  redis_url: %q\n  redis_prefix: \"memgate:\"\n",
		testenv.PostgresURL(t), redisURL)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, _ := mustServeEnv(t, map[string]string{"GATEWAY_CONFIG": path, "GATEWAY_UPSTREAM_BASE_URL": up.URL(), "GATEWAY_EMBEDDINGS_PROVIDER": "local"})

	word := fmt.Sprintf("zqxaofword%d", time.Now().UnixNano())
	if r := chat(t, gw, headers("", "alice", "trip"), false, user("my code word is "+word)); r.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}
	eventually(t, "the exchange's text in the append-only file", func() bool { return len(filesHolding(t, dir, word)) > 0 })
	before, _ := aofInfo(t, info)

	req, _ := http.NewRequest(http.MethodDelete, gw+"/v1/memory/users/alice", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE user: %d", resp.StatusCode)
	}
	eventually(t, "Redis to rewrite its append-only file after the erasure", func() bool {
		n, running := aofInfo(t, info)
		return n > before && !running
	})
	// Redis removes the files the rewrite replaced in the background.
	deadline := time.Now().Add(60 * time.Second)
	for found := filesHolding(t, dir, word); len(found) > 0; found = filesHolding(t, dir, word) {
		if time.Now().After(deadline) {
			t.Fatalf("erased text still on disk after the rewrite, in %v", found)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
