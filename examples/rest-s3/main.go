// Command rest-s3 is the quickstart against a real deployment: an Iceberg REST catalog and an S3 store. It
// writes 1,000,000 seed events in 1,000-row Write calls, prints the rate, commits and files, and reads the
// table back.
//
//	go run ./examples/rest-s3 -catalog rest://127.0.0.1:8181 -credential test:testsecret \
//		-warehouse s3://iceberg-tables -s3-endpoint http://127.0.0.1:8333
//
// Every flag can come from the environment instead: ICEBERG_CATALOG_URI, ICEBERG_CREDENTIAL (OAuth2
// client id:secret), ICEBERG_TOKEN (a bearer token), ICEBERG_WAREHOUSE, S3_ENDPOINT, AWS_REGION,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or any other AWS credential source). Against AWS itself, leave
// the endpoint empty; for Glue's or S3 Tables' REST endpoint add -sigv4 glue or -sigv4 s3tables.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	icewriter "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	"github.com/icewriter/iceberg/internal/seed"
	_ "github.com/icewriter/iceberg/storage/s3"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	uri := flag.String("catalog", env("ICEBERG_CATALOG_URI", "rest://127.0.0.1:8181"), "REST catalog URI (rest://, rest+https://)")
	credential := flag.String("credential", env("ICEBERG_CREDENTIAL", ""), "OAuth2 client credentials id:secret")
	token := flag.String("token", env("ICEBERG_TOKEN", ""), "bearer token (instead of -credential)")
	warehouse := flag.String("warehouse", env("ICEBERG_WAREHOUSE", ""), "warehouse to ask the catalog for")
	endpoint := flag.String("s3-endpoint", env("S3_ENDPOINT", ""), "S3 endpoint (empty: AWS)")
	region := flag.String("region", env("AWS_REGION", "us-east-1"), "S3 region")
	sigv4 := flag.String("sigv4", "", "sign catalog requests with AWS SigV4 for this service (glue, s3tables)")
	namespace := flag.String("namespace", "quickstart", "namespace of the table")
	rows := flag.Int("rows", 1_000_000, "events to write")
	batch := flag.Int("batch", 1000, "rows per Write call")
	inFlight := flag.Int("inflight", 4, "batches encoding and uploading at once")
	flag.Parse()

	props := iceberg.Properties{"s3.region": *region}
	set := func(k, v string) {
		if v != "" {
			props[k] = v
		}
	}
	set("credential", *credential)
	set("token", *token)
	set("warehouse", *warehouse)
	set("s3.endpoint", *endpoint)
	set("s3.access-key-id", os.Getenv("AWS_ACCESS_KEY_ID"))
	set("s3.secret-access-key", os.Getenv("AWS_SECRET_ACCESS_KEY"))
	set("s3.session-token", os.Getenv("AWS_SESSION_TOKEN"))
	if *sigv4 != "" {
		props["rest.sigv4-enabled"] = "true"
		props["rest.signing-name"] = *sigv4
		props["rest.signing-region"] = *region
	}
	if err := run(context.Background(), *uri, props, *namespace, *rows, *batch, *inFlight); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, uri string, props iceberg.Properties, namespace string, rows, batchRows, inFlight int) error {
	cat, err := catalog.OpenWithProperties(ctx, uri, props)
	if err != nil {
		return err
	}
	if c, ok := cat.(icecatalog.Closer); ok {
		defer c.Close()
	}
	ident := table.Identifier{namespace, fmt.Sprintf("events_%d", time.Now().Unix())}
	w, err := icewriter.NewWriter(ctx, cat, ident,
		icewriter.WithCreate(seed.Schema, icewriter.PartitionBy("day(ts)")),
		icewriter.WithMaxInFlight(inFlight),
		icewriter.WithFlushInterval(time.Second))
	if err != nil {
		return err
	}
	gen := seed.New(0, 42)
	start := time.Now()
	last := start
	for written := 0; written < rows; {
		n := min(batchRows, rows-written)
		rec := gen.Batch(n)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
		written += n
		if time.Since(last) > time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "\r%d written, %d committed", written, w.Stats().RowsCommitted)
		}
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintln(os.Stderr)
	st := w.Stats()
	fmt.Printf("wrote %d rows in %s: %.0f rows/s, %d commits, %d files (%.1f MiB of Parquet)\n",
		st.RowsCommitted, elapsed.Round(time.Millisecond), float64(st.RowsCommitted)/elapsed.Seconds(),
		st.Commits, st.FilesWritten, float64(st.BytesWritten)/(1<<20))

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields("id")).ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	var count int64
	for rec, err := range recs {
		if err != nil {
			return err
		}
		count += rec.NumRows()
		rec.Release()
	}
	fmt.Printf("table %s at %s holds %d rows\n", ident, tbl.Location(), count)
	if count != int64(rows) {
		return fmt.Errorf("read back %d rows, wrote %d", count, rows)
	}
	return nil
}
