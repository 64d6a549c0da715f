// Command sink writes Kafka topics into Iceberg tables as one member of a consumer group: start it several
// times (one process per member, each with its own -id) to spread the partitions. The table must exist unless
// -create is given (JSON: id int64 and payload string plus metadata columns; Avro and Protobuf: the subject's
// latest schema from the registry). Values decode as JSON objects whose keys are the table's columns, Avro or
// Protobuf through a schema registry, Debezium change events (applied by the table's identifier fields), raw
// bytes, or whole JSON values of any shape into one variant column (-decoder variant: a format v3 table, value
// variant plus metadata columns). Bad records go to -dlq when given. -route-field or -route-topics spread the records over tables
// created on first sight. -fake runs without a Kafka: an in-process cluster (franz-go's kfake) seeded with
// -fake-records JSON records, written into the table (created) and logged as they commit.
//
// A member that dies holds its partitions until its session times out (-session-timeout, default kgo's 45 s;
// the broker allows 6 s and up by default): the other members take them over then.
//
//	go run . -fake -catalog sqlite:///tmp/demo.db -table demo.orders
//	go run . -brokers localhost:9092 -group orders-sink -topics orders \
//	    -catalog sqlite:///tmp/cat.db -table db.orders -id member-0 -create
//	go run . -topics orders -decoder avro -registry http://localhost:8081 -create -dlq orders-dlq
//	go run . -topics clicks,views -route-topics clicks=web.clicks,views=web.views
//	go run . -topics orders -route-field region -route-namespace regions
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/kafka"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

// run runs the command with args until ctx ends; hooks are added to the table writer's (tests).
func run(ctx context.Context, args []string, hooks ...iceberg.Hook) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	brokers := fs.String("brokers", "localhost:9092", "seed brokers, comma-separated")
	group := fs.String("group", "iceberg-sink", "consumer group")
	topics := fs.String("topics", "", "topics, comma-separated (required)")
	uri := fs.String("catalog", "sqlite:///tmp/iceberg-sink-catalog.db", "catalog URI (sqlite://, rest://, ...)")
	ident := fs.String("table", "kafka.events", "table identifier, dot-separated (without a route)")
	id := fs.String("id", "", "this member's writer ID, stable across its restarts (default: random)")
	create := fs.Bool("create", false, "create the table if missing (JSON: id, payload; Avro/Protobuf: the registry's schema of <first topic>-value)")
	decoder := fs.String("decoder", "json", "value format: json, avro, protobuf, debezium, debezium-avro, raw or variant")
	registry := fs.String("registry", "http://localhost:8081", "schema registry URL (avro, protobuf, debezium-avro)")
	version := fs.String("debezium-version", "", "debezium: a version column name, filled from source.lsn")
	dlq := fs.String("dlq", "", "dead-letter topic for records that cannot be decoded or written (default: stop on them)")
	routeTopics := fs.String("route-topics", "", "route topics to tables: topic=ns.table,... (tables created on first sight)")
	routeField := fs.String("route-field", "", "route by this value field: table <route-namespace>.<value>")
	routeNS := fs.String("route-namespace", "kafka", "namespace of the tables a field route names")
	evolve := fs.Bool("evolve", true, "evolve the table's schema when values gain fields")
	upsert := fs.Bool("upsert", false, "upsert by id (the table's identifier field) instead of appending")
	sessionTimeout := fs.Duration("session-timeout", 0, "group session timeout: how long a dead member's partitions wait before others take them (0: kgo's 45s)")
	fake := fs.Bool("fake", false, "run against an in-process Kafka (kfake) seeded with -fake-records JSON records (implies -create)")
	fakeRecords := fs.Int("fake-records", 1000, "records -fake seeds, spread over 3 partitions of each topic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fake {
		if *topics == "" {
			*topics = "orders"
		}
		if *decoder != "json" && *decoder != "variant" {
			return fmt.Errorf("-fake seeds JSON records: -decoder %q is not json or variant", *decoder)
		}
		addrs, closeCluster, err := fakeCluster(ctx, strings.Split(*topics, ","), *fakeRecords)
		if err != nil {
			return err
		}
		defer closeCluster()
		*brokers, *create = strings.Join(addrs, ","), true
		log.Printf("in-process Kafka at %s: %d records in %s", *brokers, *fakeRecords, *topics)
	}
	if *topics == "" {
		return errors.New("-topics is required")
	}
	cat, err := catalog.Open(ctx, *uri)
	if err != nil {
		return err
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
	var createOpts []iceberg.CreateOption
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
			return err
		}
		dec = kafka.Avro(cl)
		if *decoder == "protobuf" {
			dec = kafka.Protobuf(cl)
		}
		if *create && *routeTopics == "" && *routeField == "" {
			if valueSchema, err = kafka.RegistrySchema(ctx, cl, topicList[0]+"-value"); err != nil {
				return err
			}
		}
	case "debezium", "debezium-avro":
		opts := kafka.DebeziumOptions{Version: *version}
		if *decoder == "debezium-avro" {
			if opts.Registry, err = sr.NewClient(sr.URLs(*registry)); err != nil {
				return err
			}
		}
		dec = kafka.Debezium(opts)
		meta = kafka.MetadataColumns{} // the table is the source table's copy
	case "raw":
		dec = kafka.Raw("value")
		valueSchema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true}}, nil)
	case "variant":
		dec = kafka.JSONVariant("value")
		valueSchema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
		createOpts = append(createOpts, iceberg.FormatVersion(3)) // variant is a v3 type
	default:
		return fmt.Errorf("-decoder %q: want json, avro, protobuf, debezium, debezium-avro, raw or variant", *decoder)
	}

	cfg := kafka.Config{
		Brokers: strings.Split(*brokers, ","), Group: *group, Topics: topicList, Catalog: cat, WriterID: *id,
		Decoder: dec, Metadata: meta, DeadLetterTopic: *dlq, Upsert: *upsert, SessionTimeout: *sessionTimeout,
		WriterOptions: []iceberg.Option{iceberg.WithHooks(append(hooks, commitLog{})...)},
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
				return fmt.Errorf("-route-topics: %q is not topic=ns.table", pair)
			}
			route.Topics[topic] = table.Identifier(strings.Split(tbl, "."))
		}
		cfg.Route = route
	default:
		cfg.Table = table.Identifier(strings.Split(*ident, "."))
		if *create {
			if valueSchema == nil {
				return fmt.Errorf("-create: the %s decoder's table must exist (create it with the source's columns and identifier fields)", *decoder)
			}
			if *upsert {
				createOpts = append(createOpts, iceberg.IdentifierFields("id")) // a key column is required: not nullable
			}
			cfg.WriterOptions = append(cfg.WriterOptions,
				iceberg.WithCreate(arrow.NewSchema(append(valueSchema.Fields(), metaFields...), nil), createOpts...))
		}
	}
	sink, err := kafka.New(ctx, cfg)
	if err != nil {
		return err
	}
	log.Printf("consuming %s as a member of %q (%s values%s); Ctrl-C commits and leaves the group", *topics, *group,
		*decoder, dlqNote(*dlq))
	return sink.Run(ctx)
}

// commitLog logs each table commit.
type commitLog struct{}

func (commitLog) OnCommitted(ci iceberg.CommitInfo) {
	log.Printf("committed %d rows (snapshot %d)", ci.Rows, ci.SnapshotID)
}

// fakeCluster starts an in-process Kafka (kfake) with the topics, 3 partitions each, seeded with n JSON records
// ({"id": i, "payload": "record i"}) spread over the topics and partitions.
func fakeCluster(ctx context.Context, topics []string, n int) (addrs []string, closeCluster func(), err error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		return nil, nil, err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	defer prod.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topics[i%len(topics)], Key: strconv.AppendInt(nil, int64(i), 10),
			Value: fmt.Appendf(nil, `{"id": %d, "payload": "record %d"}`, i, i)}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("seeding the in-process cluster: %w", err)
	}
	return c.ListenAddrs(), c.Close, nil
}

func dlqNote(dlq string) string {
	if dlq == "" {
		return ""
	}
	return fmt.Sprintf(", bad records to %s", dlq)
}
