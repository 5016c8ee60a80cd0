package record

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// sharedStore is what two gateways share of one store in these tests.
type sharedStore interface {
	storeCaps
	ChatLocker
	cache.Store
	ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error)
	Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error)
}

// gateway is one gateway's routing and capture over its own handle on a
// shared store, with its own cache of what it read (as the gateway wires
// them: reads and saves through cache.Reads).
type gateway struct {
	r *Router
	c *Capturer
}

// gatewayReads is a gateway's cache over its store handle.
type gatewayReads struct {
	sharedStore
	reads *cache.Reads
}

func (g gatewayReads) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	return g.reads.Head(ctx, rev, id, n)
}

func (g gatewayReads) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return g.reads.SaveExchange(ctx, ex)
}

func (g gatewayReads) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return g.reads.SaveExchanges(ctx, exs)
}

// newGatewayReads returns a gateway's cache over its handle st.
// sharedStores opens, by store name, two handles on one fresh store (a
// SQLite file both open, one PostgreSQL database), as two gateways hold
// them.
func sharedStores() map[string]func(t *testing.T) (sharedStore, sharedStore) {
	return map[string]func(t *testing.T) (sharedStore, sharedStore){
		"sqlite": func(t *testing.T) (sharedStore, sharedStore) {
			path := filepath.Join(t.TempDir(), "memgate.db")
			return mustSQLiteAt(t, path), mustSQLiteAt(t, path)
		},
		"postgres": func(t *testing.T) (sharedStore, sharedStore) {
			url := testenv.PostgresURL(t) // one database, two handles
			return mustPostgresAt(t, url), mustPostgresAt(t, url)
		},
	}
}

func newGatewayReads(st sharedStore) gatewayReads {
	return gatewayReads{sharedStore: st, reads: cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)}
}

func newGateway(tb testing.TB, st sharedStore) gateway {
	tb.Helper()
	gr := newGatewayReads(st)
	r := NewRouter(gr, nil, nil, nil)
	return gateway{r: r, c: mustCapturer(tb, nil, gr, nil, withStore(Options{Router: r}, gr))}
}

// TestTwoGatewaysChatsSharingAnOpener: two chats of one user open alike
// ("hi") on two gateways over one store (a SQLite file both open, one
// PostgreSQL database), each gateway routing and storing with its own
// cache. Their second turns are routed while the derived conversation is
// empty — both gateways adopt it — and stored in either order, each turn
// at the gateway that answered it; the chats then go on crossing
// gateways. Routing and its adoption are not one transaction with the
// save: the save's own check (BranchSeed, SaveResult.Parted) places the
// turn stored second in its branch. Each chat's turns end up in its own
// conversation, each once, in order, the one its next request (at either
// gateway) is routed to; the default conversation keeps nothing.
func TestTwoGatewaysChatsSharingAnOpener(t *testing.T) {
	for name, open := range sharedStores() {
		for _, order := range []string{"chat A stored first", "chat B stored first"} {
			t.Run(name+"/"+order, func(t *testing.T) {
				s1, s2 := open(t)
				g1, g2 := newGateway(t, s1), newGateway(t, s2)
				user := "ana-" + NewExchangeID()
				ctx := context.Background()
				turn := func(g gateway, texts ...string) memory.Exchange {
					return routedExchange(t, g.r, user, chatTurns(t, texts[:len(texts)-1]...), texts[len(texts)-1])
				}
				a := []string{"hi", "Hello A", "plan a trip", "A2", "shoes", "A3"}
				b := []string{"hi", "Hello B", "write a letter", "B2", "for a nurse", "B3"}
				a1, b1 := turn(g1, a[:2]...), turn(g2, b[:2]...)
				g1.c.Capture(ctx, a1)
				g2.c.Capture(ctx, b1)
				a2, b2 := turn(g1, a[:4]...), turn(g2, b[:4]...)
				if a2.Conversation != b2.Conversation || a2.Conversation != a1.Candidate {
					t.Fatalf("second turns routed to %q and %q, want both to the derived %q", a2.Conversation, b2.Conversation, a1.Candidate)
				}
				if order == "chat A stored first" {
					g1.c.Capture(ctx, a2)
					g2.c.Capture(ctx, b2)
				} else {
					g2.c.Capture(ctx, b2)
					g1.c.Capture(ctx, a2)
				}
				// The chats go on at the other gateway.
				a3, b3 := turn(g2, a...), turn(g1, b...)
				if a3.Conversation == b3.Conversation {
					t.Fatalf("third turns both routed to %q", a3.Conversation)
				}
				g2.c.Capture(ctx, a3)
				g1.c.Capture(ctx, b3)
				for _, g := range []gateway{g1, g2} {
					for _, tt := range []struct {
						texts []string
						conv  string
					}{{a, a3.Conversation}, {b, b3.Conversation}} {
						next := turn(g, append(append([]string(nil), tt.texts...), "more", "ok")...)
						if next.Conversation != tt.conv {
							t.Fatalf("chat %q's next turn routed to %q, want %q", tt.texts[1], next.Conversation, tt.conv)
						}
					}
				}
				for conv, want := range map[string][]string{
					a3.Conversation:            a,
					b3.Conversation:            b,
					memory.DefaultConversation: nil,
				} {
					id := memory.Identity{Tenant: "t1", User: user, Conversation: conv}
					got := texts(t, s1, id)
					branches, err := s1.Branches(ctx, id, 0)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Join(got, "|") != strings.Join(want, "|") || len(branches) != 0 {
						t.Fatalf("%s holds %q (%d superseded branches), want %q", conv, got, len(branches), want)
					}
				}
			})
		}
	}
}
