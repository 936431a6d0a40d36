package kafkaerr

import (
	"context"
	"time"

	"sink/internal/backoff"
)

// Retry calls f until it succeeds, fails with an error that passes
// returns false for (nil: Classify(err).Retriable()), or the next wait
// would end after deadline (the zero time: ctx's deadline; neither: no
// bound but ctx); between attempts it waits by pol and calls onRetry (may
// be nil) with the error and the wait. It returns f's last error and how
// many times f ran. The requests the sink makes at start (metadata, topic
// configs, the group's coordinator and offsets) are retried with it, so a
// broker that has not heard of a new topic yet, or a coordinator that is
// moving, does not stop a start that a moment later would work.
func Retry(ctx context.Context, pol backoff.Policy, deadline time.Time, passes func(error) bool,
	onRetry func(err error, wait time.Duration), f func() error) (attempts int, err error) {
	if passes == nil {
		passes = func(err error) bool { return Classify(err).Retriable() }
	}
	if deadline.IsZero() {
		deadline, _ = ctx.Deadline()
	}
	b := backoff.New(pol)
	for {
		attempts++
		if err = f(); err == nil || !passes(err) {
			return attempts, err
		}
		wait := b.Next()
		if !deadline.IsZero() && time.Now().Add(wait).After(deadline) {
			return attempts, err
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempts, err
		case <-t.C:
		}
	}
}
