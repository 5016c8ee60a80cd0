package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
)

// qualityProbe is a statement a user made and a later question about it.
type qualityProbe struct{ said, asked string }

// paraphraseProbes ask without any content word of the statement (the
// templates of eval/synth's paraphrase questions, first values).
var paraphraseProbes = []qualityProbe{
	{"I've been practising the cello for a few months now", "Which musical instrument does Carla play?"},
	{"my sister just got hired as a pediatric nurse", "What is the profession of Carla's sibling?"},
	{"we adopted a rescue greyhound last spring", "What breed of animal lives with Carla?"},
	{"I grew up in a tiny fishing village up north", "Where was Carla raised as a child?"},
	{"I'm allergic to shellfish, so no dishes with it please", "Which food must Carla avoid?"},
	{"my husband works night shifts at the fire station", "Where is Carla's spouse employed?"},
	{"I drive a little red Fiat to the office", "What vehicle does Carla own?"},
	{"our son turned seven in March", "How old is Carla's boy?"},
	{"at night I read mystery novels until I fall asleep", "What genre does Carla enjoy before bed?"},
	{"honestly mint tea is my thing, never coffee", "Which hot beverage does Carla drink?"},
	{"I volunteer at the animal shelter every Saturday morning", "On what weekday does Carla help out with abandoned dogs and cats?"},
	{"I teach chemistry at the high school", "Which subject does Carla give classes in?"},
}

// portugueseProbes are Portuguese statements and questions sharing a
// content word with them, as people ask.
var portugueseProbes = []qualityProbe{
	{"O meu cão chama-se Bolinha e adora a praia", "Como se chama o meu cão?"},
	{"Comecei aulas de violino às terças-feiras", "Em que dia são as aulas de violino?"},
	{"A minha irmã mudou-se para Coimbra no verão passado", "Para onde se mudou a minha irmã?"},
	{"Sou alérgica a amendoins desde criança", "A que sou alérgica?"},
	{"O nosso filho faz oito anos em maio", "Quantos anos faz o nosso filho?"},
	{"Trabalho como enfermeira no hospital de Santa Maria", "Em que hospital trabalho?"},
	{"Comprei uma bicicleta elétrica para ir para o trabalho", "Que bicicleta comprei?"},
	{"A reunião com o senhorio ficou marcada para sexta-feira", "Quando é a reunião com o senhorio?"},
	{"Prefiro chá verde ao café da manhã", "O que prefiro ao café da manhã?"},
	{"O meu marido está a aprender a cozinhar comida tailandesa", "Que comida está o meu marido a aprender?"},
}

// qualityFiller is everyday talk around the probes.
var qualityFiller = []string{
	"the weather has been grey all week, I miss the sun",
	"work was busy today, lots of meetings about the new project",
	"we watched a documentary about whales last night",
	"I need to renew my passport before the summer",
	"the neighbours are renovating their kitchen and it's so loud",
	"I finally fixed the leaking tap in the bathroom",
	"my phone battery dies by lunchtime these days",
	"we're thinking about repainting the living room green",
	"the train was late again this morning",
	"I tried a new bakery near the station, the croissants were great",
	"my back hurts after moving all those boxes",
	"we booked a table for Friday at the Italian place",
	"I should call my grandmother this weekend",
	"the printer at the office jammed twice today",
	"I lost my umbrella on the bus",
	"our internet was down for the whole afternoon",
	"I'm trying to drink more water during the day",
	"the football match went to penalties, what a finish",
	"I started a puzzle with a thousand pieces",
	"the car needs new tyres before winter",
	"Fui ao mercado comprar fruta e legumes",
	"Esta semana choveu todos os dias",
	"Vimos um filme antigo no domingo à noite",
	"Tenho de marcar consulta no dentista",
}

// TestRecallQualityOfTheEmbedders indexes the probes' statements among
// everyday talk, through the wired recall on SQLite, with each offline
// embedder, and asks the questions. It holds two properties and logs the
// ranks (the numbers in the report of issue 26):
//   - with the encoder, the paraphrased questions, which share no content
//     word with what was said, find their statement among the first five
//     for most probes;
//   - Portuguese questions find their statement among the first five with
//     either embedder: full text is fused with the vectors, so a language
//     the encoder does not know keeps its recall.
func TestRecallQualityOfTheEmbedders(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes through the encoder")
	}
	for _, provider := range []string{"encoder", "local"} {
		t.Run(provider, func(t *testing.T) {
			search := mustQualityRecall(t, provider)
			para := probeRanks(t, search, paraphraseProbes)
			pt := probeRanks(t, search, portugueseProbes)
			t.Logf("%s: paraphrase first %d, top-5 %d of %d (ranks %v); Portuguese first %d, top-5 %d of %d (ranks %v)",
				provider, count(para, 1), count(para, 5), len(para), para, count(pt, 1), count(pt, 5), len(pt), pt)
			if got := count(pt, 5); got != len(pt) {
				t.Errorf("%s: Portuguese statements in the top 5 for %d of %d questions (ranks %v)", provider, got, len(pt), pt)
			}
			if provider == "encoder" {
				if got := count(para, 5); got < 9 {
					t.Errorf("encoder: paraphrased statements in the top 5 for %d of %d questions (ranks %v)", got, len(para), para)
				}
			}
		})
	}
}

// mustQualityRecall wires recall with provider over a fresh SQLite store,
// indexes the probes and the filler for one user, and returns its search.
func mustQualityRecall(t *testing.T, provider string) func(q string) []memory.Item {
	t.Helper()
	cfg := config.Default()
	cfg.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
	cfg.Recall.Embeddings.Provider = provider
	cfg.Recall.Extraction.Enabled = false
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	bk, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	st := bk.store
	t.Cleanup(func() { bk.close() })
	layer, err := openRecall(cfg, st, bk.embeddings, kept{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, p := range paraphraseProbes {
		said = append(said, p.said)
	}
	for _, p := range portugueseProbes {
		said = append(said, p.said)
	}
	said = append(said, qualityFiller...)
	id := memory.Identity{Tenant: "t", User: "carla", Conversation: "c"}
	var exs []memory.Exchange
	var res []memory.SaveResult
	for i, s := range said {
		exs = append(exs, memory.Exchange{ID: fmt.Sprintf("x%d", i), Identity: id,
			Turn:  []memory.Message{{Role: "user", Content: s}},
			Reply: memory.Message{Role: "assistant", Content: "Noted."}})
		res = append(res, memory.SaveResult{Inserted: 2})
	}
	var indexed bool
	for _, h := range layer.Hooks {
		if ix, isIndexer := h.(*recall.Indexer); isIndexer {
			if err := ix.AfterSaveBatch(ctx, exs, res); err != nil {
				t.Fatal(err)
			}
			indexed = true
		}
	}
	if !indexed {
		t.Fatal("no indexer among recall's hooks")
	}
	return func(q string) []memory.Item {
		items, err := layer.Manager.Search(ctx, id.Tenant, id.User, q, 5)
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
}

// probeRanks returns each probe's statement's rank among the results of
// its question (1-based; 0 when absent).
func probeRanks(t *testing.T, search func(string) []memory.Item, probes []qualityProbe) []int {
	t.Helper()
	ranks := make([]int, len(probes))
	for i, p := range probes {
		for r, it := range search(p.asked) {
			if strings.Contains(it.Text, p.said) {
				ranks[i] = r + 1
				break
			}
		}
	}
	return ranks
}

// count returns how many ranks are within 1..k.
func count(ranks []int, k int) int {
	n := 0
	for _, r := range ranks {
		if r >= 1 && r <= k {
			n++
		}
	}
	return n
}
