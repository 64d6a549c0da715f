package iceberg_test

import (
	"fmt"

	iceberg "github.com/icewriter/iceberg"
)

// A source that maps a type by format version (variant exists from v3 on) asks the create options it was given
// which version its tables will have.
func ExampleCreateFormatVersion() {
	fmt.Println(iceberg.CreateFormatVersion())
	fmt.Println(iceberg.CreateFormatVersion(iceberg.PartitionBy("day(ts)"), iceberg.FormatVersion(3)))
	// Output:
	// 2
	// 3
}
