//go:build integration

package kafka_test

import (
	"context"
	"os"
	"strings"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	"github.com/icewriter/iceberg/internal/testenv"
	_ "github.com/icewriter/iceberg/storage/s3"
)

// restBackend is SeaweedFS's REST catalog with the warehouse on its S3 (scripts/integration.sh's servers), as
// the member processes open it too.
func restBackend(t testing.TB) backend {
	t.Helper()
	access, secret := testenv.Keys()
	wh := os.Getenv(testenv.RESTWarehouse)
	if wh == "" {
		wh = "s3://iceberg-tables"
	}
	props := map[string]string{"credential": access + ":" + secret, "warehouse": wh}
	for k, v := range testenv.S3Props(testenv.Get(t, testenv.SeaweedS3Endpoint)) {
		props[k] = v
	}
	uri := "rest://" + strings.TrimPrefix(testenv.Get(t, testenv.RESTURI), "rest://")
	cat, err := catalog.OpenWithProperties(context.Background(), uri, props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, ok := catalog.Backend(cat).(icecatalog.Closer); ok {
			_ = c.Close()
		}
	})
	return backend{uri: uri, props: props, cat: cat}
}

// freshTable names a table no earlier run used (the REST server keeps its tables).
func freshTable() table.Identifier {
	return table.Identifier{"kafka_it", "events_" + uuid.NewString()[:8]}
}

// TestSinkMemberProcessesREST is TestSinkMemberProcesses on the REST catalog and S3: member processes, one
// killed with SIGKILL and restarted, append and upsert, each checked against the model.
func TestSinkMemberProcessesREST(t *testing.T) {
	memberProcesses(t, func(t *testing.T) (backend, table.Identifier) { return restBackend(t), freshTable() })
}

// BenchmarkSinkMembersREST is the scale-out benchmark (benchMembers) on the REST catalog and S3 (SeaweedFS on
// loopback): run by `scripts/integration.sh bench-kafka`.
func BenchmarkSinkMembersREST(b *testing.B) {
	benchMembers(b, func(b *testing.B) backend { return restBackend(b) })
}
