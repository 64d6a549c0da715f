package commit

import (
	"errors"
	"fmt"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/redact"
)

// TestConflictCauseOfEachWording: the errors iceberg-go's requirements return when they fail (produced by
// validating them against a real table's metadata), the sentinels catalogs wrap, and what masking makes of
// them, each classified as the conflict it is or as none.
func TestConflictCauseOfEachWording(t *testing.T) {
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	meta, err := table.NewMetadata(sc, ice.UnpartitionedSpec, table.UnsortedSortOrder, "file:///tmp/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	failed := func(r table.Requirement, m table.Metadata) error {
		t.Helper()
		err := r.Validate(m)
		if err == nil {
			t.Fatalf("%T holds", r)
		}
		return err
	}
	head := int64(5)
	cases := []struct {
		name string
		err  error
		want ConflictCause
	}{
		{"branch moved (the SQL catalog's words)", errors.New(`requirement failed: branch "main" has changed: expected id 4, found 5`), ConflictBranch},
		{"branch gone", failed(table.AssertRefSnapshotID("main", &head), meta), ConflictBranch},
		{"current schema", failed(table.AssertCurrentSchemaID(7), meta), ConflictSchema},
		{"last column ID", failed(table.AssertLastAssignedFieldID(70), meta), ConflictSchema},
		{"partition spec", failed(table.AssertDefaultSpecID(3), meta), ConflictPartitioning},
		{"last partition ID", failed(table.AssertLastAssignedPartitionID(3000), meta), ConflictPartitioning},
		{"sort order", failed(table.AssertDefaultSortOrderID(3), meta), ConflictPartitioning},
		{"compare-and-swap lost", fmt.Errorf("%w: table ns.t metadata-location moved underneath us", table.ErrCommitFailed), ConflictCatalog},
		{"REST 409", fmt.Errorf("%w: Commit failed: conflict", rest.ErrCommitFailed), ConflictCatalog},
		{"REST 409 quoting the requirement", fmt.Errorf("%w: Requirement failed: branch main has changed", rest.ErrCommitFailed), ConflictBranch},
		{"masked", redact.New().Error(fmt.Errorf("commit: %w", failed(table.AssertCurrentSchemaID(7), meta))), ConflictSchema},
		{"table dropped", failed(table.AssertCurrentSchemaID(0), nil), ""},
		{"table replaced", failed(table.AssertTableUUID(uuid.New()), meta), ""},
		{"table exists", failed(table.AssertCreate(), meta), ""},
		{"network", errors.New("dial tcp: connection refused"), ""},
	}
	for _, c := range cases {
		if got := Cause(c.err); got != c.want {
			t.Errorf("%s: %q classified %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
