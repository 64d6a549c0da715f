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
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

// routeEnv routes three topics: clicks and views by topic into kafka.clicks and kafka.views, orders by its
// region field into regions.eu and regions.us; all tables are created on first sight from the inferred JSON
// schema plus metadata columns. model is what each table must hold: (topic, partition, offset) -> id.
type routeEnv struct {
	*valuesEnv
	cfg   kafka.Config
	model map[string]map[[3]string]int64
	next  int64
	// waitUS: wait for regions.us's positions too (false when it commits only when a member leaves).
	waitUS bool
}

var regions = []string{"eu", "us"}

func newRouteEnv(t *testing.T, waitUS bool, opts ...iceberg.RouterOption) *routeEnv {
	e := newValuesEnv(t, "clicks", "views", "orders")
	route := &kafka.Route{
		Topics: map[string]table.Identifier{"clicks": {"kafka", "clicks"}, "views": {"kafka", "views"}},
		Field:  "region", Namespace: table.Identifier{"regions"}, RouterOptions: opts,
	}
	return &routeEnv{valuesEnv: e, model: map[string]map[[3]string]int64{}, waitUS: waitUS,
		cfg: kafka.Config{Group: "routed", Topics: []string{"clicks", "views", "orders"}, Catalog: e.cat, Route: route,
			Metadata: kafka.MetadataColumns{Topic: "_topic", Partition: "_partition", Offset: "_offset"}}}
}

// produce sends n records round-robin over the topics and partitions, and adds them to the model.
func (e *routeEnv) produce(n int) {
	var recs []*kgo.Record
	tables := map[*kgo.Record]string{}
	for range n {
		id := e.next
		e.next++
		topic := []string{"clicks", "views", "orders"}[id%3]
		v := fmt.Appendf(nil, `{"id": %d, "what": "%s-%d"}`, id, topic, id)
		tbl := "kafka." + topic
		if topic == "orders" {
			region := regions[id%4/2]
			v = fmt.Appendf(nil, `{"id": %d, "what": "order-%d", "region": "%s"}`, id, id, region)
			tbl = "regions." + region
		}
		r := &kgo.Record{Topic: topic, Partition: int32(id % valuesParts), Value: v}
		recs = append(recs, r)
		tables[r] = tbl
	}
	e.valuesEnv.produce(recs...)
	for _, r := range recs {
		var id int64
		fmt.Sscanf(string(r.Value), `{"id": %d`, &id)
		if e.model[tables[r]] == nil {
			e.model[tables[r]] = map[[3]string]int64{}
		}
		e.model[tables[r]][[3]string{r.Topic, fmt.Sprint(r.Partition), fmt.Sprint(r.Offset)}] = id
	}
}

func (e *routeEnv) start(id string) *sinkRun {
	cfg := e.cfg
	cfg.WriterID = id
	return e.valuesEnv.start(cfg)
}

// waitAll waits until every table's positions cover what was produced.
func (e *routeEnv) waitAll() {
	e.waitPositions(table.Identifier{"kafka", "clicks"}, "clicks")
	e.waitPositions(table.Identifier{"kafka", "views"}, "views")
	e.waitPositions(table.Identifier{"regions", "eu"}, "orders")
	if e.waitUS {
		e.waitPositions(table.Identifier{"regions", "us"}, "orders")
	}
}

// waitMembers waits for the group to be stable with n members.
func (e *routeEnv) waitMembers(n int) {
	if _, err := e.cluster.WaitGroupInfo(e.ctx, e.cfg.Group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == n && g.NumAssigned() == 3*valuesParts
	}); err != nil {
		e.t.Fatalf("group not stable with %d members: %v", n, err)
	}
}

// check reads every table back: exactly its records, once each.
func (e *routeEnv) check() {
	t := e.t
	if len(e.model) != 4 {
		t.Fatalf("model has %d tables, want 4", len(e.model))
	}
	for name := range e.model {
		e.checkTable(name)
	}
}

// checkTable reads one table back: exactly its records in the model, once each.
func (e *routeEnv) checkTable(name string) {
	t, want := e.t, e.model[name]
	ns, tbl, _ := strings.Cut(name, ".")
	seen := map[[3]string]int{}
	for _, r := range e.rows(table.Identifier{ns, tbl}) {
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

// TestRouteByTopicAndField: half-way the member is killed (its uncommitted rows die with it) and another takes
// over: it resumes each partition from the lowest of its tables' positions and skips, per table, what that
// table holds. Every table ends holding exactly its records, once: with the router's multi-table commit rounds,
// and with per-table commits where regions.us commits only when a member leaves (so when the first member
// dies, regions.us holds none of its rows while regions.eu holds them: the partitions of orders resume from
// their start and skip, for regions.eu only, what it holds).
func TestRouteByTopicAndField(t *testing.T) {
	t.Run("rounds", func(t *testing.T) { testRouteCrash(newRouteEnv(t, true)) })
	t.Run("per-table", func(t *testing.T) {
		testRouteCrash(newRouteEnv(t, false, iceberg.WithPerTableCommits(), iceberg.WithTableConfig(
			func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
				if strings.Join(ident, ".") != "regions.us" {
					return iceberg.TableConfig{}, nil
				}
				return iceberg.TableConfig{Options: []iceberg.Option{iceberg.WithFlushInterval(time.Hour)}}, nil
			})))
	})
}

func testRouteCrash(e *routeEnv) {
	e.produce(300)
	first := e.start("member-0")
	e.waitAll()
	e.produce(120) // polled, maybe written, not all committed when the member dies
	first.sink.Crash(e.ctx)
	if err := <-first.done; !errors.Is(err, kafka.ErrCrashed) {
		e.t.Fatalf("crashed member's Run: %v", err)
	}
	e.produce(180)
	second := e.start("member-1")
	e.waitAll()
	e.stop(second)
	e.check()
}

// TestRouteAcrossRebalances runs routed members as a group: two start, a third joins while records flow
// (cooperative-sticky moves partitions: a revoked partition's rows commit in each of its tables before it is
// released), one leaves; the tables end holding exactly their records.
func TestRouteAcrossRebalances(t *testing.T) {
	e := newRouteEnv(t, true)
	e.produce(300)
	m0, m1 := e.start("member-0"), e.start("member-1")
	e.waitMembers(2)
	e.produce(300)
	e.waitAll()
	m2 := e.start("member-2")
	e.produce(300)
	e.waitMembers(3)
	e.produce(300)
	e.waitAll()
	e.stop(m1)
	e.waitMembers(2)
	e.produce(300)
	e.waitAll()
	e.stop(m0)
	e.stop(m2)
	e.check()
}

// TestRouteRestartsARecreatedTopic: with RestartRecreatedTopics, a routed topic deleted and created again is read
// from its start: its table holds the old topic's records and every one of the new topic's, once (the table's
// positions of the old topic cover none of the new one's offsets), and the other tables are untouched.
func TestRouteRestartsARecreatedTopic(t *testing.T) {
	e := newRouteEnv(t, true)
	e.cfg.RestartRecreatedTopics = true
	e.produce(60) // 10 records in each partition of each topic
	first := e.start("member-0")
	e.waitAll()
	e.stop(first)

	want := map[int64]bool{}
	for _, id := range e.model["kafka.clicks"] {
		want[id] = true
	}
	delete(e.model, "kafka.clicks")
	if err := e.cluster.DeleteTopic("clicks"); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.CreateTopic("clicks", valuesParts, nil); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	e.prod = prod
	e.mu.Lock()
	for p := range valuesParts {
		delete(e.ends, fmt.Sprintf("clicks/%d", p))
	}
	e.mu.Unlock()
	e.produce(180) // 30 in each partition of the new clicks: past the old positions (10)
	for _, id := range e.model["kafka.clicks"] {
		want[id] = true
	}
	second := e.start("member-1")
	e.waitAll()
	e.stop(second)

	seen := map[int64]int{}
	for _, r := range e.rows(table.Identifier{"kafka", "clicks"}) {
		id, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
		seen[id]++
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("kafka.clicks: record id %d is there %d times", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("kafka.clicks: %d ids, want %d", len(seen), len(want))
	}
	for _, name := range []string{"kafka.views", "regions.eu", "regions.us"} {
		e.checkTable(name)
	}
}
