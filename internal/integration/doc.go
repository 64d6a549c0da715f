// Package integration holds the writer-level integration tests and benchmarks that run against real servers
// (SeaweedFS's Iceberg REST catalog and S3, versitygw, PostgreSQL, MariaDB). Its test files carry the
// integration build tag and skip when the endpoints are not set; scripts/integration.sh starts the servers and
// runs them:
//
//	bash scripts/integration.sh             # the whole integration suite, with the race detector
//	bash scripts/integration.sh bench       # the REST+S3 vs embedded throughput benchmark
package integration
