package main

import (
	"context"
	"fmt"
	"os"

	"sink/config"
	"sink/internal/registry"
	"sink/tools/eventfmt"
	"sink/tools/gen"
)

// produceFramed is gen.Produce.Run for the registry formats: the same events
// (same seed, same ids, same keys and partitioner), each re-encoded by
// eventfmt and framed with the schema id registered under subject.
func produceFramed(ctx context.Context, p gen.Produce, format, registryURL, subject string) (gen.Result, error) {
	enc, err := eventfmt.NewEncoder(format)
	if err != nil {
		return gen.Result{}, err
	}
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{registryURL}}, registry.Options{})
	if err != nil {
		return gen.Result{}, err
	}
	id, err := enc.Register(ctx, rc, subject)
	if err != nil {
		return gen.Result{}, err
	}
	fmt.Fprintf(os.Stderr, "loadgen: %s schema registered under subject %s as id %d\n", format, subject, id)
	p.Encode = enc.Append
	return p.Run(ctx)
}
