// Command sink writes Kafka topics into Iceberg tables as one member of a consumer group: start it several
// times (one process per member, each with its own -id) to spread the partitions. The table must exist unless
// -create is given (JSON: id int64 and payload string plus metadata columns; Avro and Protobuf: the subject's
// latest schema from the registry). Values decode as JSON objects whose keys are the table's columns, Avro or
// Protobuf through a schema registry, Debezium change events (applied by the table's identifier fields), or
// raw bytes. Bad records go to -dlq when given. -route-field or -route-topics spread the records over tables
// created on first sight.
//
//	go run . -brokers localhost:9092 -group orders-sink -topics orders \
//	    -catalog sqlite:///tmp/cat.db -table db.orders -id member-0 -create
//	go run . -topics orders -decoder avro -registry http://localhost:8081 -create -dlq orders-dlq
//	go run . -topics clicks,views -route-topics clicks=web.clicks,views=web.views
//	go run . -topics orders -route-field region -route-namespace regions
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/kafka"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "seed brokers, comma-separated")
	group := flag.String("group", "iceberg-sink", "consumer group")
	topics := flag.String("topics", "", "topics, comma-separated (required)")
	uri := flag.String("catalog", "sqlite:///tmp/iceberg-sink-catalog.db", "catalog URI (sqlite://, rest://, ...)")
	ident := flag.String("table", "kafka.events", "table identifier, dot-separated (without a route)")
	id := flag.String("id", "", "this member's writer ID, stable across its restarts (default: random)")
	create := flag.Bool("create", false, "create the table if missing (JSON: id, payload; Avro/Protobuf: the registry's schema of <first topic>-value)")
	decoder := flag.String("decoder", "json", "value format: json, avro, protobuf, debezium, debezium-avro or raw")
	registry := flag.String("registry", "http://localhost:8081", "schema registry URL (avro, protobuf, debezium-avro)")
	version := flag.String("debezium-version", "", "debezium: a version column name, filled from source.lsn")
	dlq := flag.String("dlq", "", "dead-letter topic for records that cannot be decoded or written (default: stop on them)")
	routeTopics := flag.String("route-topics", "", "route topics to tables: topic=ns.table,... (tables created on first sight)")
	routeField := flag.String("route-field", "", "route by this value field: table <route-namespace>.<value>")
	routeNS := flag.String("route-namespace", "kafka", "namespace of the tables a field route names")
	evolve := flag.Bool("evolve", true, "evolve the table's schema when values gain fields")
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
	topicList := strings.Split(*topics, ",")
	meta := kafka.MetadataColumns{Topic: "_topic", Partition: "_partition", Offset: "_offset", Timestamp: "_timestamp"}
	metaFields := []arrow.Field{
		{Name: "_topic", Type: arrow.BinaryTypes.String},
		{Name: "_partition", Type: arrow.PrimitiveTypes.Int32},
		{Name: "_offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_timestamp", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}

	var dec kafka.Decoder
	var valueSchema *arrow.Schema
	switch *decoder {
	case "json":
		dec = kafka.JSON()
		valueSchema = arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
		}, nil)
	case "avro", "protobuf":
		cl, err := sr.NewClient(sr.URLs(*registry))
		if err != nil {
			log.Fatal(err)
		}
		dec = kafka.Avro(cl)
		if *decoder == "protobuf" {
			dec = kafka.Protobuf(cl)
		}
		if *create && *routeTopics == "" && *routeField == "" {
			if valueSchema, err = kafka.RegistrySchema(ctx, cl, topicList[0]+"-value"); err != nil {
				log.Fatal(err)
			}
		}
	case "debezium", "debezium-avro":
		opts := kafka.DebeziumOptions{Version: *version}
		if *decoder == "debezium-avro" {
			if opts.Registry, err = sr.NewClient(sr.URLs(*registry)); err != nil {
				log.Fatal(err)
			}
		}
		dec = kafka.Debezium(opts)
		meta = kafka.MetadataColumns{} // the table is the source table's copy
	case "raw":
		dec = kafka.Raw("value")
		valueSchema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true}}, nil)
	default:
		log.Fatalf("-decoder %q: want json, avro, protobuf, debezium, debezium-avro or raw", *decoder)
	}

	cfg := kafka.Config{
		Brokers: strings.Split(*brokers, ","), Group: *group, Topics: topicList, Catalog: cat, WriterID: *id,
		Decoder: dec, Metadata: meta, DeadLetterTopic: *dlq, Upsert: *upsert,
	}
	if *evolve {
		cfg.WriterOptions = append(cfg.WriterOptions, iceberg.WithSchemaEvolution())
	}
	switch {
	case *routeTopics != "" || *routeField != "":
		route := &kafka.Route{Topics: map[string]table.Identifier{}, Field: *routeField}
		if *routeField != "" {
			route.Namespace = table.Identifier(strings.Split(*routeNS, "."))
		}
		for _, pair := range strings.Split(*routeTopics, ",") {
			if pair == "" {
				continue
			}
			topic, tbl, ok := strings.Cut(pair, "=")
			if !ok {
				log.Fatalf("-route-topics: %q is not topic=ns.table", pair)
			}
			route.Topics[topic] = table.Identifier(strings.Split(tbl, "."))
		}
		cfg.Route = route
	default:
		cfg.Table = table.Identifier(strings.Split(*ident, "."))
		if *create {
			if valueSchema == nil {
				log.Fatalf("-create: the %s decoder's table must exist (create it with the source's columns and identifier fields)", *decoder)
			}
			var keys []iceberg.CreateOption
			if *upsert {
				keys = append(keys, iceberg.IdentifierFields("id")) // a key column is required: not nullable
			}
			cfg.WriterOptions = append(cfg.WriterOptions,
				iceberg.WithCreate(arrow.NewSchema(append(valueSchema.Fields(), metaFields...), nil), keys...))
		}
	}
	sink, err := kafka.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("consuming %s as a member of %q (%s values%s); Ctrl-C commits and leaves the group", *topics, *group,
		*decoder, dlqNote(*dlq))
	if err := sink.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func dlqNote(dlq string) string {
	if dlq == "" {
		return ""
	}
	return fmt.Sprintf(", bad records to %s", dlq)
}
