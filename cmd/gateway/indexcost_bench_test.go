package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// largeMessageSize is the length of BenchmarkIndexLargeMessage's messages:
// a whole default request body.
const largeMessageSize = 2 << 20

// largeMessages are adversarial texts of about size bytes for indexing:
// ordinary prose, distinct random words (with and without sentence
// ends), very long tokens, many unique short tokens, and non-ASCII words.
func largeMessages(size int) map[string]string {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet []rune, lo, hi int) string {
		n := lo + r.IntN(hi-lo+1)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	fill := func(next func(i int) string) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			b.WriteString(next(i))
		}
		return b.String()
	}
	latin := []rune("abcdefghijklmnopqrstuvwxyz")
	cyr := []rune("абвгдежзийклмнопрстуфхцчшщыэюя")
	cjk := []rune("日本語中文한국어漢字東京大阪北京上海首尔")
	prose := strings.Fields("I moved to Porto last spring and the weather there is mild most of the year while my sister still lives in Lisbon near the river we talk every week about books music and the garden")
	out := map[string]string{
		"prose": fill(func(i int) string {
			s := prose[i%len(prose)]
			if i%13 == 12 {
				return s + ". "
			}
			return s + " "
		}),
		"random-words": fill(func(i int) string {
			if i%15 == 14 {
				return word(latin, 3, 10) + ". "
			}
			return word(latin, 3, 10) + " "
		}),
		"random-words-no-stops": fill(func(int) string { return word(latin, 3, 10) + " " }),
		"long-tokens":           fill(func(int) string { return word(latin, 900, 1100) + " " }),
		"short-unique":          fill(func(i int) string { return strconv.FormatInt(int64(i), 36) + " " }),
		"non-ascii": fill(func(i int) string {
			a := cyr
			if i%3 == 0 {
				a = cjk
			}
			if i%15 == 14 {
				return word(a, 2, 8) + ". "
			}
			return word(a, 2, 8) + " "
		}),
	}
	// Real English, from a file (MEMGATE_INDEX_BENCH_ENGLISH), cut to
	// size on a rune boundary.
	if path := os.Getenv("MEMGATE_INDEX_BENCH_ENGLISH"); path != "" {
		if b, err := os.ReadFile(path); err == nil {
			out["english"] = strings.ToValidUTF8(string(b[:min(len(b), size)]), "")
		}
	}
	return out
}

// indexStore is a store the benchmark saves and indexes into.
type indexStore interface {
	recall.IndexStore
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
}

// BenchmarkIndexLargeMessage saves one exchange whose user message is
// largeMessageSize bytes of each adversarial text and indexes it
// (recall's Indexer with the built-in encoder, as the gateway wires it),
// into SQLite on a temporary file and into PostgreSQL, and reports the CPU
// it cost: this process's, plus, for PostgreSQL, its server processes'
// serving this benchmark's connections (read from /proc).
func BenchmarkIndexLargeMessage(b *testing.B) {
	size := largeMessageSize
	if s := os.Getenv("MEMGATE_INDEX_BENCH_SIZE"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	texts := largeMessages(size)
	names := slices.Sorted(maps.Keys(texts))
	emb, window := benchEncoder(b)
	for _, driver := range []string{"sqlite", "postgres"} {
		if only := os.Getenv("MEMGATE_INDEX_BENCH_STORE"); only != "" && only != driver {
			continue
		}
		b.Run(driver, func(b *testing.B) {
			ctx := context.Background()
			st, backend := openIndexBenchStore(b, driver)
			ix := recall.NewIndexer(st, emb, nil)
			ix.Window = window
			for _, name := range names {
				text := texts[name]
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					var save, index time.Duration
					for i := range b.N {
						id := memory.Identity{Tenant: "default", User: fmt.Sprintf("ixb-%d-%s-%d-%d", os.Getpid(), name, i, time.Now().UnixNano()), Conversation: "c"}
						user, err := memory.ParseMessage(jsonMessage(b, "user", text))
						if err != nil {
							b.Fatal(err)
						}
						reply, err := memory.ParseMessage(jsonMessage(b, "assistant", "Noted."))
						if err != nil {
							b.Fatal(err)
						}
						ex := memory.Exchange{ID: "ex-" + id.User, Identity: id, Model: "gpt-4o-mini", Turn: []memory.Message{user}, Reply: reply, At: time.Now().UTC()}
						c0, p0 := cpuTime(b), backend()
						res, err := st.SaveExchange(ctx, ex)
						if err != nil {
							b.Fatal(err)
						}
						c1, p1 := cpuTime(b), backend()
						if err := ix.AfterSave(ctx, ex, res); err != nil {
							b.Fatal(err)
						}
						c2, p2 := cpuTime(b), backend()
						save += c1 - c0 + p1 - p0
						index += c2 - c1 + p2 - p1
					}
					b.ReportMetric(float64(save.Milliseconds())/float64(b.N), "save-cpu-ms")
					b.ReportMetric(float64(index.Milliseconds())/float64(b.N), "index-cpu-ms")
				})
			}
		})
	}
}

// benchEncoder returns the built-in encoder as the gateway wires it, and
// its window.
func benchEncoder(b *testing.B) (recall.Embedder, *recall.Window) {
	b.Helper()
	emb, _, err := engine.NewEmbedder(engine.EmbedderOptions{Provider: "encoder"}, recall.NewEmbeddingCache(recall.DefaultEmbeddingBytes), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	window, err := engine.EmbedderWindow("encoder")
	if err != nil {
		b.Fatal(err)
	}
	return emb, window
}

// openIndexBenchStore opens a store of driver for an indexing benchmark,
// SQLite on a temporary file or PostgreSQL, and a function that reports
// the CPU its server processes spent so far (0 for SQLite, which runs in
// this process).
func openIndexBenchStore(b *testing.B, driver string) (indexStore, func() time.Duration) {
	ctx := context.Background()
	if driver == "sqlite" {
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "memgate.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, func() time.Duration { return 0 }
	}
	app := "memgate-indexbench-" + strconv.Itoa(os.Getpid())
	url := testenv.PostgresURL(b)
	if strings.Contains(url, "?") {
		url += "&application_name=" + app
	} else {
		url += "?application_name=" + app
	}
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	return s, func() time.Duration { return backendCPU(b, conn, app) }
}

// BenchmarkIndexBacklog saves one exchange too long for one round of
// indexing and indexes it as the gateway does: its round (AfterSave, the
// built-in encoder embedding its user's budget), then the rounds of the
// index backlog (the enricher's idle work) until none is left, into
// SQLite and PostgreSQL. It reports the CPU (this process's and
// PostgreSQL's servers') of the first round, of the backlog's rounds (the
// most one took, and all of them) and how many there were. The inputs:
// a resent chat of 2,000 messages of about 450 bytes of English text
// (MEMGATE_INDEX_BENCH_ENGLISH) and of distinct random words, and each of
// largeMessages as one message.
func BenchmarkIndexBacklog(b *testing.B) {
	size := largeMessageSize
	if s := os.Getenv("MEMGATE_INDEX_BENCH_SIZE"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	texts := largeMessages(size)
	inputs := map[string][]string{}
	for name, text := range texts {
		inputs["message-"+name] = []string{text}
		if name == "english" || name == "random-words" {
			var msgs []string
			for len(msgs) < 2000 && len(text) > 450 {
				cut := 450 + max(0, strings.IndexByte(text[450:], ' '))
				msgs, text = append(msgs, strings.TrimSpace(text[:cut])), text[cut:]
			}
			inputs["history-"+name] = msgs
		}
	}
	names := slices.Sorted(maps.Keys(inputs))
	emb, window := benchEncoder(b)
	for _, driver := range []string{"sqlite", "postgres"} {
		if only := os.Getenv("MEMGATE_INDEX_BENCH_STORE"); only != "" && only != driver {
			continue
		}
		b.Run(driver, func(b *testing.B) {
			ctx := context.Background()
			st, backend := openIndexBenchStore(b, driver)
			for _, name := range names {
				msgs := inputs[name]
				b.Run(name, func(b *testing.B) {
					var first, rest, most time.Duration
					rounds := 0
					for i := range b.N {
						ix := recall.NewIndexer(st, emb, nil)
						ix.Window = window
						id := memory.Identity{Tenant: "default", User: fmt.Sprintf("ixbl-%d-%s-%d-%d", os.Getpid(), name, i, time.Now().UnixNano()), Conversation: "c"}
						all := make([]memory.Message, 0, len(msgs)+1)
						for k, text := range msgs {
							m, err := memory.ParseMessage(jsonMessage(b, []string{"user", "assistant"}[k%2], text))
							if err != nil {
								b.Fatal(err)
							}
							all = append(all, m)
						}
						if len(all)%2 == 1 {
							reply, err := memory.ParseMessage(jsonMessage(b, "assistant", "Noted."))
							if err != nil {
								b.Fatal(err)
							}
							all = append(all, reply)
						}
						n := len(all)
						ex := memory.Exchange{ID: "ex-" + id.User, Identity: id, Model: "gpt-4o-mini", Prior: all[:n-2], Turn: all[n-2 : n-1], Reply: all[n-1], At: time.Now().UTC()}
						res, err := st.SaveExchange(ctx, ex)
						if err != nil {
							b.Fatal(err)
						}
						res.GuardSince = ex.At
						c0, p0 := cpuTime(b), backend()
						if err := ix.AfterSave(ctx, ex, res); err != nil {
							b.Fatal(err)
						}
						c1, p1 := cpuTime(b), backend()
						first += c1 - c0 + p1 - p0

						for {
							n, err := ix.IndexBacklog(ctx)
							if err != nil {
								b.Fatal(err)
							}
							c2, p2 := cpuTime(b), backend()
							if n == 0 {
								break
							}
							rounds++
							d := c2 - c1 + p2 - p1

							rest, most, c1, p1 = rest+d, max(most, d), c2, p2
						}
						if left, err := st.PendingIndex(ctx, 1, 1); err != nil || len(left) > 0 {
							b.Fatalf("the backlog holds %d entries after its rounds (%v)", len(left), err)
						}
					}
					b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "first-cpu-ms")
					b.ReportMetric(float64(rounds)/float64(b.N), "rounds")
					b.ReportMetric(float64(most.Milliseconds()), "max-round-cpu-ms")
					b.ReportMetric(float64(rest.Milliseconds())/float64(b.N), "rounds-cpu-ms")
				})
			}
		})
	}
}

func jsonMessage(tb testing.TB, role, content string) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]string{"role": role, "content": content})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// backendCPU is the CPU time of the PostgreSQL server processes serving
// the connections named app, so far (from /proc: the server runs on this
// machine in tests).
func backendCPU(tb testing.TB, conn *pgx.Conn, app string) time.Duration {
	tb.Helper()
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		tb.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stt, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+stt) * 10 * time.Millisecond // USER_HZ 100
	}
	return total
}

// BenchmarkLargeMessageGateway sends each of largeMessages, as large as
// the default body limit allows, as one memory-on chat completion through
// the whole gateway (SQLite, default configuration, capture and
// enrichment against the fake upstream) and reports the process's CPU
// from the request to the end of everything it started, as
// BenchmarkHostileInputs does.
func BenchmarkLargeMessageGateway(b *testing.B) {
	size := largeMessageSize - 4<<10
	if s := os.Getenv("MEMGATE_INDEX_BENCH_SIZE"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	texts := largeMessages(size)
	names := slices.Sorted(maps.Keys(texts))
	for _, name := range names {
		var body []byte
		for text := texts[name]; ; text = strings.ToValidUTF8(text[:len(text)*31/32], "") {
			var err error
			if body, err = json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{{"role": "user", "content": text}}}); err != nil {
				b.Fatal(err)
			}
			if len(body) <= 2<<20 { // the default body limit
				break
			}
		}
		b.Run(name, func(b *testing.B) {
			g := startHostileGateway(b, nil)
			base := g.idleGoroutines(b)
			b.SetBytes(int64(len(body)))
			var cpu, answered, next time.Duration
			for range b.N {
				before := cpuTime(b)
				if st, _ := g.send(b, body); st != 200 {
					b.Fatalf("status %d", st)
				}
				answered += cpuTime(b) - before
				g.settle(b, base, 10*time.Minute)
				cpu += cpuTime(b) - before
				// The same user's next question searches what was indexed
				// (the in-memory item index reads it in).
				before = cpuTime(b)
				if st := g.sendAs(b, g.seq, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What did I say about the garden?"}]}`)); st != 200 {
					b.Fatalf("next: status %d", st)
				}
				next += cpuTime(b) - before
				g.settle(b, base, 10*time.Minute)
			}
			b.ReportMetric(float64(next.Milliseconds())/float64(b.N), "next-cpu-ms")
			b.ReportMetric(float64(answered.Milliseconds())/float64(b.N), "answer-cpu-ms")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/req")
		})
	}
}

// sendAs posts body as user hostile-<n>'s memory-on chat completion in
// conversation c and returns the status.
func (g *hostileGateway) sendAs(tb testing.TB, n int, body []byte) int {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", fmt.Sprintf("hostile-%d", n))
	req.Header.Set("X-Memory-Conversation", "c")
	res, err := g.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode == http.StatusOK {
		g.answered++
	}
	return res.StatusCode
}
