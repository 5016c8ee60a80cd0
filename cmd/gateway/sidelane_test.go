package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestHungSideModelHoldsUpNoIndexing: the side model (the summariser's
// and fact extraction's, here the upstream) stops answering its calls
// while chats go on. The turns stored after it hung are searchable
// within a short wait, long before its calls time out: the gateway's
// enricher never holds indexing up behind side-model work.
func TestHungSideModelHoldsUpNoIndexing(t *testing.T) {
	release := make(chan struct{})
	var once, first sync.Once
	hung := make(chan struct{})
	echo := echoUpstream()
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"response_format"`)) {
			echo.ServeHTTP(w, r)
			return
		}
		first.Do(func() { close(hung) })
		select { // a side-model call: no answer until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	cfg := storeConfigs(t, up)["sqlite"](t)
	cfg.Compaction.MaxMessages, cfg.Compaction.KeepMessages = 2, 1
	cfg.Compaction.Timeout = config.Duration(5 * time.Minute)
	g := startGateway(t, cfg)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the gateway stops
	h := headers("", "noor", "c")
	if r := chat(t, g.URL, h, false, user("My name is Noor and I keep bees on the roof.")); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	select {
	case <-hung:
	case <-time.After(time.Minute):
		t.Fatal("no side-model call")
	}
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "noor", Conversation: "c"}
	for i := range 3 {
		if r := chat(t, g.URL, h, false, user(fmt.Sprintf("Hive number %d sits beside the chimney.", i))); r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
	}
	waitStored(t, g, id, 8)
	deadline := time.Now().Add(20 * time.Second) // the side model's calls wait 30 s and more
	for {
		var out struct{ Data []memory.Item }
		if code := apiCall(t, http.MethodPost, g.URL+"/v1/memory/search", nil, map[string]any{"user": "noor", "query": "hive chimney", "top_k": 10}, &out); code != http.StatusOK {
			t.Fatalf("search = %d", code)
		}
		found := 0
		for _, it := range out.Data {
			if strings.Contains(it.Text, "Hive number 2") {
				found++
			}
		}
		if found > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last turn is not searchable while the side model hangs (%d items found)", len(out.Data))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
