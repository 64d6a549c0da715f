package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

// routeModel is what each routed table must hold: (topic, partition, offset) -> id.
type routeModel map[string]map[[3]string]int64

// TestRouteByTopicAndField routes two topics into two tables (clicks, views) and a third topic by its region
// field into one table per region (regions.eu, regions.us), all created on first sight from the inferred JSON
// schema plus metadata columns. Half-way the member is killed (its uncommitted rows die with it) and another
// takes over: it resumes each partition from the lowest of its tables' positions and skips, per table, what
// that table holds. Every table ends holding exactly its records, once: with the router's multi-table commit
// rounds, and with per-table commits where regions.us commits only when the member leaves (so when the first
// member dies, regions.us holds none of its rows while regions.eu holds them: the partitions of orders resume
// from their start and skip, for regions.eu only, what it holds).
func TestRouteByTopicAndField(t *testing.T) {
	t.Run("rounds", func(t *testing.T) { testRoute(t, false) })
	t.Run("per-table", func(t *testing.T) {
		testRoute(t, true, iceberg.WithPerTableCommits(), iceberg.WithTableConfig(
			func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
				if strings.Join(ident, ".") != "regions.us" {
					return iceberg.TableConfig{}, nil
				}
				return iceberg.TableConfig{Options: []iceberg.Option{iceberg.WithFlushInterval(time.Hour)}}, nil
			}))
	})
}

func testRoute(t *testing.T, slowUS bool, opts ...iceberg.RouterOption) {
	e := newValuesEnv(t, "clicks", "views", "orders")
	model := routeModel{}
	regions := []string{"eu", "us"}
	next := int64(0)
	produce := func(n int) {
		var recs []*kgo.Record
		for range n {
			id := next
			next++
			topic := []string{"clicks", "views", "orders"}[id%3]
			v := fmt.Appendf(nil, `{"id": %d, "what": "%s-%d"}`, id, topic, id)
			if topic == "orders" {
				v = fmt.Appendf(nil, `{"id": %d, "what": "order-%d", "region": "%s"}`, id, id, regions[id%4/2])
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(id % valuesParts), Value: v})
		}
		e.produce(recs...)
		for _, r := range recs {
			var id int64
			fmt.Sscanf(string(r.Value), `{"id": %d`, &id)
			tbl := "kafka." + r.Topic
			if r.Topic == "orders" {
				tbl = "regions." + regions[id%4/2]
			}
			if model[tbl] == nil {
				model[tbl] = map[[3]string]int64{}
			}
			model[tbl][[3]string{r.Topic, fmt.Sprint(r.Partition), fmt.Sprint(r.Offset)}] = id
		}
	}
	route := &kafka.Route{
		Topics: map[string]table.Identifier{"clicks": {"kafka", "clicks"}, "views": {"kafka", "views"}},
		Field:  "region", Namespace: table.Identifier{"regions"}, RouterOptions: opts,
	}
	cfg := kafka.Config{Topics: []string{"clicks", "views", "orders"}, Catalog: e.cat, Route: route,
		Metadata: kafka.MetadataColumns{Topic: "_topic", Partition: "_partition", Offset: "_offset"}}
	waitAll := func() {
		e.waitPositions(table.Identifier{"kafka", "clicks"}, "clicks")
		e.waitPositions(table.Identifier{"kafka", "views"}, "views")
		e.waitPositions(table.Identifier{"regions", "eu"}, "orders")
		if !slowUS {
			e.waitPositions(table.Identifier{"regions", "us"}, "orders")
		}
	}

	produce(300)
	cfg.WriterID = "member-0"
	first := e.start(cfg)
	waitAll()
	produce(120) // polled, maybe written, not all committed when the member dies
	first.sink.Crash(e.ctx)
	if err := <-first.done; !errors.Is(err, kafka.ErrCrashed) {
		t.Fatalf("crashed member's Run: %v", err)
	}
	produce(180)
	cfg.WriterID = "member-1"
	second := e.start(cfg)
	waitAll()
	e.stop(second)

	for name, want := range model {
		ns, tbl, _ := strings.Cut(name, ".")
		ident := table.Identifier{ns, tbl}
		seen := map[[3]string]int{}
		for _, r := range e.rows(ident) {
			k := [3]string{fmt.Sprint(r["_topic"]), fmt.Sprint(r["_partition"]), fmt.Sprint(r["_offset"])}
			seen[k]++
			id, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
			if w, ok := want[k]; !ok || w != id {
				t.Errorf("table %s: row %v is not one of its records", name, r)
			}
		}
		for k := range want {
			if seen[k] != 1 {
				t.Errorf("table %s: record %v is there %d times", name, k, seen[k])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("table %s: %d records, want %d", name, len(seen), len(want))
		}
	}
	if len(model) != 4 {
		t.Fatalf("model has %d tables, want 4", len(model))
	}
}
