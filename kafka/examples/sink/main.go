// Command sink writes Kafka topics into an Iceberg table as one member of a consumer group: start it several
// times (one process per member, each with its own -id) to spread the partitions. Values are JSON objects whose
// keys are the table's columns; the table must exist unless -create is given.
//
//	go run . -brokers localhost:9092 -group orders-sink -topics orders \
//	    -catalog sqlite:///tmp/cat.db -table db.orders -id member-0 -create
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/kafka"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "seed brokers, comma-separated")
	group := flag.String("group", "iceberg-sink", "consumer group")
	topics := flag.String("topics", "", "topics, comma-separated (required)")
	uri := flag.String("catalog", "sqlite:///tmp/iceberg-sink-catalog.db", "catalog URI (sqlite://, rest://, ...)")
	ident := flag.String("table", "kafka.events", "table identifier, dot-separated")
	id := flag.String("id", "", "this member's writer ID, stable across its restarts (default: random)")
	create := flag.Bool("create", false, "create the table (id int64, payload string, plus metadata columns) if missing")
	upsert := flag.Bool("upsert", false, "upsert by id (the table's identifier field) instead of appending")
	flag.Parse()
	if *topics == "" {
		log.Fatal("-topics is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cat, err := catalog.Open(ctx, *uri)
	if err != nil {
		log.Fatal(err)
	}
	var opts []iceberg.Option
	if *create {
		var keys []iceberg.CreateOption
		if *upsert {
			keys = append(keys, iceberg.IdentifierFields("id"))
		}
		opts = append(opts, iceberg.WithCreate(arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: !*upsert}, // a key column is required
			{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "_topic", Type: arrow.BinaryTypes.String},
			{Name: "_partition", Type: arrow.PrimitiveTypes.Int32},
			{Name: "_offset", Type: arrow.PrimitiveTypes.Int64},
			{Name: "_timestamp", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		}, nil), keys...))
	}
	sink, err := kafka.New(ctx, kafka.Config{
		Brokers: strings.Split(*brokers, ","), Group: *group, Topics: strings.Split(*topics, ","),
		Catalog: cat, Table: table.Identifier(strings.Split(*ident, ".")), WriterID: *id, WriterOptions: opts,
		Upsert:   *upsert,
		Metadata: kafka.MetadataColumns{Topic: "_topic", Partition: "_partition", Offset: "_offset", Timestamp: "_timestamp"},
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("consuming %s as a member of %q; Ctrl-C commits and leaves the group", *topics, *group)
	if err := sink.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
