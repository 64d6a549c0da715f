// Package postgres is a change-data-capture source from PostgreSQL into Iceberg tables, built on the icewriter
// Router: Run copies the tables (a consistent snapshot from a replication slot's exported snapshot, in parallel
// COPY chunks, in the router's bulk phase), then streams their changes (logical replication with pgoutput) into
// Apply, exactly once across crashes: every table's rows commit with the source position they cover, and the
// slot confirms an LSN only after the Iceberg commits that hold it. Tables added later join the publication and
// are copied, then streamed; a table with a DEFERRABLE key has each transaction applied by its net effect; a lost
// server is reconnected to (Config.ReconnectTimeout). See Run for the types, the schema changes, the resume rules
// and the TOAST policy, and cmd/pg2iceberg for the program.
package postgres
