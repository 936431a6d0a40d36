package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
)

// groupProtocolOpts are the group options of kafka.group_protocol. Under
// consumer the broker assigns (KIP-848) with the assignor named after the
// first balancer: franz-go maps StickyBalancer to the broker's "uniform"
// assignor and RangeBalancer to "range". The sink takes the sticky one:
// its batches span every partition of a table, so a partition that stays
// where it is keeps its open batch, and uniform spreads the partitions of
// all topics evenly over the members while range balances topic by topic
// (with several topics of few partitions, range loads the first members).
// A broker without ConsumerGroupHeartbeat v1 (Kafka before 4.0) would make
// franz-go fall back to the classic protocol with that balancer, plain
// sticky, which is eager: New asks the broker first and stays on
// cooperative-sticky then (with a warning); watchProtocol catches a
// fallback New could not foresee.
func groupProtocolOpts(k config.Kafka) []kgo.Opt {
	if k.GroupProtocol == config.GroupConsumer {
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	}
	return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
}

// GroupProtocol is the protocol the consumer group runs, as the broker
// lists it ("classic" or "consumer"), once this member has joined and the
// broker was asked; "" before.
func (c *Consumer) GroupProtocol() string {
	if p := c.protocol.Load(); p != nil {
		return *p
	}
	return ""
}

// watchProtocol waits until this member has joined its group, asks the
// broker which protocol the group runs and logs it once: a warning when
// it is not the one kafka.group_protocol asked for (franz-go falls back to
// classic without a word when the broker lacks KIP-848). It returns when
// ctx ends or the answer is logged.
func (c *Consumer) watchProtocol(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	asked := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, gen := c.cl.GroupMetadata(); gen <= 0 {
			continue // not a member yet
		}
		got, err := groupType(ctx, c.cl, c.cfg.Kafka.Group)
		if err != nil {
			// The group is listed by its coordinator only; ask again
			// a few times, then say that it is unknown and stop.
			if asked++; asked == 20 {
				c.log.Warn().Err(err).Str("group", c.cfg.Kafka.Group).Str("requested", c.cfg.Kafka.GroupProtocol).
					Msg("could not learn which consumer group protocol the group runs")
				return
			}
			continue
		}
		c.protocol.Store(&got)
		ev := c.log.Info()
		msg := "consumer group protocol"
		if want := c.asked; got != want {
			ev = c.log.Warn()
			msg = protocolMismatch(want, got)
		}
		ev.Str("group", c.cfg.Kafka.Group).Str("requested", c.cfg.Kafka.GroupProtocol).Str("running", got).Msg(msg)
		return
	}
}

// protocolMismatch explains why a group runs got when want was asked for.
func protocolMismatch(want, got string) string {
	if want == config.GroupConsumer {
		return "kafka.group_protocol is consumer but the group runs " + got +
			": the broker refused the consumer protocol (is consumer in its group.coordinator.rebalance.protocols?); this member balances with the eager sticky balancer, every rebalance revokes all its partitions"
	}
	return "kafka.group_protocol is classic but the group runs " + got +
		": other members use the consumer protocol and the broker lets this classic member join their group"
}

// groupType asks the brokers for group's type. A broker that lists groups
// without their type (before Kafka 3.8's ListGroups v5) has only classic
// groups.
func groupType(ctx context.Context, cl *kgo.Client, group string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListGroups(ctx) // not closed: that would close cl
	if err != nil {
		var shard *kadm.ShardErrors
		if !errors.As(err, &shard) {
			return "", err
		}
		// Some broker did not answer; the coordinator may have.
	}
	g, ok := listed[group]
	if !ok {
		return "", fmt.Errorf("group %q is not listed by the brokers", group)
	}
	if g.GroupType == "" {
		return config.GroupClassic, nil
	}
	return g.GroupType, nil
}

// brokerHasKIP848 asks a broker whether it serves ConsumerGroupHeartbeat
// v1, the version franz-go requires for the consumer protocol. A broker
// that advertises it may still refuse it (the consumer protocol disabled
// in group.coordinator.rebalance.protocols): watchProtocol tells that case.
func brokerHasKIP848(ctx context.Context, cl *kgo.Client, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest().Key()
	for _, k := range resp.ApiKeys {
		if k.ApiKey == hb {
			return k.MaxVersion >= 1, nil
		}
	}
	return false, nil
}
