-- covered_tokens is what the messages a summary and its predecessors
-- replaced would cost verbatim (memory.Summary.CoveredTokens), for the
-- tokens-saved accounting.
ALTER TABLE summaries ADD COLUMN covered_tokens integer NOT NULL DEFAULT 0;

-- Fact confidence is computed in float64 (max of both, +0.1); a real column
-- would hand back 0.800000011920929 for 0.8. Double precision round-trips.
ALTER TABLE facts ALTER COLUMN confidence TYPE double precision;
