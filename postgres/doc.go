// Package postgres is a change-data-capture source from PostgreSQL into Iceberg tables, built on the
// icewriter Router.
package postgres
