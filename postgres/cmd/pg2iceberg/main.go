// Command pg2iceberg copies Postgres tables into Iceberg tables and keeps them up to date (logical
// replication, exactly once across restarts). Configure it with flags or a small JSON file:
//
//	pg2iceberg -source postgres://postgres@127.0.0.1:5432/shop -tables all \
//		-catalog 'sqlite:///srv/lake/catalog.db?warehouse=file:///srv/lake/warehouse'
//
//	pg2iceberg -config pg2iceberg.json
//
//	{"source": "postgres://postgres@127.0.0.1:5432/shop", "tables": "all",
//	 "catalog": "sqlite:///srv/lake/catalog.db?warehouse=file:///srv/lake/warehouse", "mode": "full"}
//
// Without a catalog, the tables go to an embedded catalog in ./pg2iceberg. Flags given on the command line win
// over the file. The source needs wal_level=logical and a role with the
// REPLICATION attribute; each table a primary key. "mode" is "full" (snapshot, then changes until
// interrupted) or "snapshot" (copy and exit). "format_version" (-format-version) is the format version of the
// Iceberg tables it creates: 2 by default, 3 for json/jsonb columns as variant and added columns' defaults. A REST catalog takes its settings in "catalog_properties"
// (credential, warehouse, s3.endpoint, ...). Interrupt (Ctrl-C, SIGTERM) commits what was read and exits; the
// next start resumes from the replication slot.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apache/iceberg-go"

	icewriter "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	"github.com/icewriter/iceberg/postgres"
	_ "github.com/icewriter/iceberg/storage/s3"
)

// fileConfig is the JSON file's shape.
type fileConfig struct {
	Source            string            `json:"source"`
	Tables            json.RawMessage   `json:"tables"` // "all" or ["schema.table", ...]
	Catalog           string            `json:"catalog"`
	CatalogProperties map[string]string `json:"catalog_properties"`
	Mode              string            `json:"mode"`
	Slot              string            `json:"slot"`
	Namespace         string            `json:"namespace"`
	Workers           int               `json:"workers"`
	FormatVersion     int               `json:"format_version"`
}

// defaultCatalog is the embedded catalog in ./pg2iceberg (absolute paths: file:// URIs take no relative ones).
func defaultCatalog() string {
	dir, err := filepath.Abs("pg2iceberg")
	if err != nil {
		dir = "pg2iceberg"
	}
	return "sqlite://" + filepath.Join(dir, "catalog.db") + "?warehouse=file://" + filepath.Join(dir, "warehouse")
}

func main() {
	if err := run(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "pg2iceberg:", err)
		os.Exit(1)
	}
}

func run() error {
	configPath := flag.String("config", "", "JSON configuration file (flags given win over it)")
	source := flag.String("source", "", "source DSN, e.g. postgres://user@host:5432/db")
	tables := flag.String("tables", "", `tables to copy: "all" (default) or schema.table,schema.table`)
	cat := flag.String("catalog", "", "target catalog URI (default: an embedded catalog in ./pg2iceberg)")
	mode := flag.String("mode", "", `"full" (default: snapshot, then changes) or "snapshot"`)
	slot := flag.String("slot", "", `replication slot and publication name (default "icewriter")`)
	namespace := flag.String("namespace", "", "Iceberg namespace (default: each table's Postgres schema)")
	workers := flag.Int("workers", 0, "connections copying the snapshot in parallel (default: GOMAXPROCS)")
	formatVersion := flag.Int("format-version", 0, "format version of the Iceberg tables it creates (default 2; 3: json/jsonb as variant, added columns' defaults kept)")
	flag.Parse()

	var fc fileConfig
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return fmt.Errorf("%s: %w", *configPath, err)
		}
	}
	set := func(dst *string, flagValue string) {
		if flagValue != "" {
			*dst = flagValue
		}
	}
	set(&fc.Source, *source)
	set(&fc.Catalog, *cat)
	set(&fc.Mode, *mode)
	set(&fc.Slot, *slot)
	set(&fc.Namespace, *namespace)
	if *workers > 0 {
		fc.Workers = *workers
	}
	if *formatVersion > 0 {
		fc.FormatVersion = *formatVersion
	}
	if fc.Catalog == "" {
		fc.Catalog = defaultCatalog()
	}
	if fc.Source == "" {
		return fmt.Errorf("no source: give -source or \"source\" in -config")
	}
	names, err := tableList(fc.Tables, *tables)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := catalog.OpenWithProperties(ctx, fc.Catalog, iceberg.Properties(fc.CatalogProperties))
	if err != nil {
		return fmt.Errorf("catalog %s: %w", fc.Catalog, err)
	}
	cfg := postgres.Config{DSN: fc.Source, Tables: names, Mode: postgres.Mode(fc.Mode), Slot: fc.Slot,
		Workers: fc.Workers, Logger: slog.Default()}
	if fc.Namespace != "" {
		cfg.Namespace = strings.Split(fc.Namespace, ".")
	}
	if fc.FormatVersion > 0 {
		cfg.CreateOptions = append(cfg.CreateOptions, icewriter.FormatVersion(fc.FormatVersion))
	}
	return postgres.Run(ctx, c, cfg)
}

// tableList reads the tables from the flag (if given) or the file's "tables": "all" or empty means every
// table.
func tableList(file json.RawMessage, flagValue string) ([]string, error) {
	if flagValue != "" {
		if flagValue == "all" {
			return nil, nil
		}
		return strings.Split(flagValue, ","), nil
	}
	if len(file) == 0 {
		return nil, nil
	}
	var all string
	if json.Unmarshal(file, &all) == nil {
		if all != "all" {
			return nil, fmt.Errorf(`"tables": want "all" or a list of names, got %q`, all)
		}
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(file, &names); err != nil {
		return nil, fmt.Errorf(`"tables": want "all" or a list of names: %w`, err)
	}
	return names, nil
}
