package advise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"sink/config"
	"sink/internal/consumer"
)

// Run is `sink advise`: it finds the topics cfg consumes that a route
// matches, measures them for window (reading up to sample records of
// each), and prints the advice for tgt to out.
func Run(ctx context.Context, cfg *config.Config, window time.Duration, sample int, tgt Target, out io.Writer) error {
	parts, err := consumer.Probe(ctx, cfg)
	if err != nil {
		return err
	}
	tables, names, err := Routed(cfg, slices.Sorted(maps.Keys(parts)))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("no consumed topic matches a route: nothing to measure")
	}
	fmt.Fprintf(out, "measuring %s for %s...\n", strings.Join(names, ", "), window)
	topics, err := Measure(ctx, cfg.Kafka, names, window, sample)
	if err != nil {
		return err
	}
	for i := range topics {
		topics[i].Table = tables[topics[i].Name]
	}
	Recommend(topics, cfg, tgt).Print(out, cfg)
	return nil
}
