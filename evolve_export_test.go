package iceberg

// DeadLetterWired reports whether the writer's base conformer routes bad Arrow rows to WithDeadLetter without
// schema evolution (it needs setTable to build conformers with the writer set).
func DeadLetterWired(w *Writer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conf.w != nil
}
