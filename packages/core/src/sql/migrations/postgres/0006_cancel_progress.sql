-- PostgreSQL schema, version 6: cancellation and progress. `progress` is the latest value a
-- running job's handler reported (`ctx.progress`, JSON of at most 8 KiB), written with the lease
-- renewal and copied to history; `cancel_requested` marks a running job an operator cancelled:
-- its owner learns it from its next renewal. Never edit after release: add a later file
-- instead. `{{jobs}}` is the quoted, schema-qualified jobs table, `{{history}}` the history table.
--
-- A nullable column, and a NOT NULL one with a constant default: PostgreSQL adds both without
-- rewriting the table.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS progress jsonb;

ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false;

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS progress jsonb;
