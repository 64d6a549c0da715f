package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerWatch follows the client's broker connections through kgo's hooks. kgo retries a lost broker forever,
// so a cluster lost while the member runs would look like a member with nothing to read: the first failure of
// an outage is logged, the first answer after it too, and Run stops with ErrUnreachable once no broker has
// answered for Config.ConnectTimeout since the outage began (watch).
type brokerWatch struct {
	log      *slog.Logger
	writerID string
	// downSince is when the current outage began (unix nanoseconds): the first failed connection or read
	// since a broker last answered; 0 while brokers answer.
	downSince atomic.Int64
}

var (
	_ kgo.HookBrokerConnect = (*brokerWatch)(nil)
	_ kgo.HookBrokerRead    = (*brokerWatch)(nil)
)

// OnBrokerConnect marks a failed connection as the start of an outage.
func (b *brokerWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		b.failed(meta, err)
	}
}

// OnBrokerRead ends an outage at the first response read, and marks a failed read as the start of one.
func (b *brokerWatch) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		b.failed(meta, err)
		return
	}
	if since := b.downSince.Swap(0); since != 0 {
		b.log.Info("kafka: brokers answer again", "writer", b.writerID, "broker", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)),
			"down_for", time.Since(time.Unix(0, since)).Round(time.Millisecond))
	}
}

func (b *brokerWatch) failed(meta kgo.BrokerMetadata, err error) {
	if b.downSince.CompareAndSwap(0, time.Now().UnixNano()) {
		b.log.Warn("kafka: broker unreachable; retrying", "writer", b.writerID,
			"broker", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), "err", err)
	}
}

// watch calls stop with an error wrapping ErrUnreachable when an outage has lasted timeout, checking a few
// times per timeout until ctx ends.
func (b *brokerWatch) watch(ctx context.Context, timeout time.Duration, brokers []string, stop func(error)) {
	tick := time.NewTicker(min(max(timeout/4, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		since := b.downSince.Load()
		if since == 0 {
			continue
		}
		if down := time.Since(time.Unix(0, since)); down >= timeout {
			stop(fmt.Errorf("%w: member with writer ID %q: no broker of %v answered for %v (Config.ConnectTimeout); "+
				"the rows read and not committed are read again from the table's positions when the member starts again",
				ErrUnreachable, b.writerID, brokers, down.Round(time.Millisecond)))
			return
		}
	}
}
