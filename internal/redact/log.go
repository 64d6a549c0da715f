package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Logger returns l with every record masked by r before l's handler sees it: the message, string attributes,
// errors (replaced by their masked form, so a handler that prints %+v or walks the chain meets no secret) and
// any other value whose printed form holds a secret. A logger already masked by r is returned as it is.
func Logger(l *slog.Logger, r *Redactor) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if h, ok := l.Handler().(*handler); ok && h.r == r {
		return l
	}
	return slog.New(&handler{h: l.Handler(), r: r})
}

// handler masks records for the handler it wraps.
type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool { return h.h.Enabled(ctx, level) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(masked), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}

// attr masks one attribute (groups recursively; LogValuers resolved first).
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		masked := make([]any, len(g))
		for i, ga := range g {
			masked[i] = h.attr(ga)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, h.r.Error(err))
		}
		s := fmt.Sprintf("%+v", v.Any())
		if m := h.r.String(s); m != s {
			return slog.String(a.Key, m)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
