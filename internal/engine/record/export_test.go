package record

// The test helpers erase_test.go (package record_test) uses. That test
// runs the production hooks, engine/enrich's among them, and engine/enrich
// imports record: only an external test package can import both.
var (
	TestExchange   = exchange
	FastWorker     = fastWorker
	MustRunWorker  = mustRunWorker
	Enqueue        = enqueue
	MustSQLite     = mustSQLite
	OutboxPending  = outboxPending
	MustRedisQueue = mustRedisQueue
)
