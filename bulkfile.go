package iceberg

// spanEnd returns the length of the longest prefix of q[:n] a run may take without splitting a bulk file: no
// batch in it has its rows in a file still open, and every closed file it touches ends inside it.
func spanEnd(q []*batch, n int) int {
	end := 0
	var until int64
	for i, b := range q[:n] {
		if b.bulk.Span != nil {
			if !b.bulk.Span.Done {
				break
			}
			until = max(until, b.bulk.Span.Until)
		}
		if until <= b.Seq {
			end = i + 1
		}
	}
	return end
}
