package iceberg

// Stopped returns a channel closed once the writer's commit loop and encoders have all returned.
func Stopped(w *Writer) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		<-w.done
		w.encWG.Wait()
		close(ch)
	}()
	return ch
}
