package storetest_test

import (
	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/mcpserver"
	"github.com/memgate/memgate/internal/savings"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/ui"
)

// Every store meets, at compile time, the contracts its consumers declare
// (the stores never import their consumers; this test does, for them).
var (
	_ storetest.Store          = (*sqlite.Store)(nil)
	_ storetest.Store          = (*postgres.Store)(nil)
	_ storetest.KnowledgeStore = (*sqlite.Store)(nil)
	_ storetest.KnowledgeStore = (*postgres.Store)(nil)
	_ storetest.Queue          = (*sqlite.Outbox)(nil)
	_ storetest.Queue          = (*redis.Queue)(nil)
	_ cache.Store              = (*sqlite.Store)(nil)
	_ cache.Store              = (*postgres.Store)(nil)
	_ prompt.RevisionReader    = (*sqlite.Store)(nil)
	_ prompt.RevisionReader    = (*postgres.Store)(nil)
	_ record.Saver             = (*sqlite.Store)(nil)
	_ record.Saver             = (*postgres.Store)(nil)
	_ record.BatchSaver        = (*sqlite.Store)(nil)
	_ record.BatchSaver        = (*postgres.Store)(nil)
	_ record.DeadLetterer      = (*sqlite.Store)(nil)
	_ record.DeadLetterer      = (*postgres.Store)(nil)
	_ record.Adopter           = (*sqlite.Store)(nil)
	_ record.Adopter           = (*postgres.Store)(nil)
	_ record.ChatLocker        = (*sqlite.Store)(nil)
	_ record.ChatLocker        = (*postgres.Store)(nil)
	_ record.Queue             = (*sqlite.Outbox)(nil)
	_ record.Queue             = (*redis.Queue)(nil)
	_ recall.IndexStore        = (*sqlite.Store)(nil)
	_ recall.IndexStore        = (*postgres.Store)(nil)
	_ recall.ItemSearcher      = (*sqlite.Store)(nil)
	_ recall.ItemSearcher      = (*postgres.Store)(nil)
	_ recall.TermStats         = (*sqlite.Store)(nil)
	_ recall.TermStats         = (*postgres.Store)(nil)
	_ recall.ManageStore       = (*sqlite.Store)(nil)
	_ recall.ManageStore       = (*postgres.Store)(nil)
	_ recall.ContextReader     = (*sqlite.Store)(nil)
	_ recall.ContextReader     = (*postgres.Store)(nil)
	_ recall.FactWriter        = (*sqlite.Store)(nil)
	_ recall.FactWriter        = (*postgres.Store)(nil)
	_ recall.FactReader        = (*sqlite.Store)(nil)
	_ recall.FactReader        = (*postgres.Store)(nil)
	_ recall.Reembedder        = (*sqlite.Store)(nil)
	_ recall.Reembedder        = (*postgres.Store)(nil)
	_ enrich.Store             = (*sqlite.Store)(nil)
	_ enrich.Store             = (*postgres.Store)(nil)
	_ enrich.FactWriter        = (*sqlite.Store)(nil)
	_ enrich.FactWriter        = (*postgres.Store)(nil)
	_ admin.Store              = (*sqlite.Store)(nil)
	_ admin.Store              = (*postgres.Store)(nil)
	_ admin.Erasures           = (*sqlite.Store)(nil)
	_ admin.Erasures           = (*postgres.Store)(nil)
	_ ui.Inspector             = (*sqlite.Store)(nil)
	_ ui.Inspector             = (*postgres.Store)(nil)
	_ ui.Footprinter           = (*sqlite.Store)(nil)
	_ ui.Footprinter           = (*postgres.Store)(nil)
	_ ui.FactPinner            = (*sqlite.Store)(nil)
	_ ui.FactPinner            = (*postgres.Store)(nil)
	_ ui.SavingsReader         = (*sqlite.Store)(nil)
	_ ui.SavingsReader         = (*postgres.Store)(nil)
	_ mcpserver.Store          = (*sqlite.Store)(nil)
	_ mcpserver.Store          = (*postgres.Store)(nil)
	_ mcpserver.Pinner         = (*sqlite.Store)(nil)
	_ mcpserver.Pinner         = (*postgres.Store)(nil)
	_ mcpserver.Summaries      = (*sqlite.Store)(nil)
	_ mcpserver.Summaries      = (*postgres.Store)(nil)
	_ savings.Store            = (*sqlite.Store)(nil)
	_ savings.Store            = (*postgres.Store)(nil)
)
