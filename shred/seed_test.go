package shred

import (
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// SeedEvent is the seed benchmark's event (see DESIGN.md).
type SeedEvent struct {
	ID        int64 `iceberg:"id,required"`
	UserID    int64
	EventType string
	Value     float64
	Info      string
	TS        time.Time `iceberg:"ts"`
}

var eventTypes = []string{"click", "view", "purchase", "signup", "logout", "search"}

func seedEvents(n int) []SeedEvent {
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]SeedEvent, n)
	buf := make([]byte, 46)
	for i := range rows {
		for j := range buf {
			buf[j] = byte(r.UintN(256))
		}
		rows[i] = SeedEvent{
			ID:        int64(i),
			UserID:    r.Int64N(100000),
			EventType: eventTypes[r.IntN(len(eventTypes))],
			Value:     r.Float64() * 1000,
			Info:      hex.EncodeToString(buf),
			TS:        start.Add(time.Duration(i) * time.Millisecond),
		}
	}
	return rows
}
