package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"sink/config"
	"sink/internal/kafkaauth"
)

// saslSummary says how the sink authenticates to the brokers: the
// mechanism and where its secret comes from, never the secret.
func saslSummary(s config.SASL) string {
	switch s.Mechanism {
	case "":
		return "SASL off"
	case config.SASLOAuthBearer:
		o := s.OAuth
		parts := []string{fmt.Sprintf("SASL OAUTHBEARER, client %q at %s", o.ClientID, o.TokenEndpoint)}
		if o.ClientSecretFile != "" {
			parts = append(parts, "client secret from "+o.ClientSecretFile)
		} else {
			parts = append(parts, "client secret "+o.ClientSecret.String()) // masked
		}
		if o.Scope != "" {
			parts = append(parts, fmt.Sprintf("scope %q", o.Scope))
		}
		if len(o.Extensions) > 0 {
			parts = append(parts, "extensions "+strings.Join(slices.Sorted(maps.Keys(o.Extensions)), ", "))
		}
		return strings.Join(parts, ", ")
	case config.SASLAWSMSKIAM:
		a := s.AWS
		parts := []string{"SASL AWS_MSK_IAM, credentials from the AWS SDK's default chain"}
		if a.Profile != "" {
			parts = append(parts, fmt.Sprintf("profile %q", a.Profile))
		}
		if a.RoleARN != "" {
			parts = append(parts, "assuming "+a.RoleARN)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("SASL %s as %q, %s", s.Mechanism, s.Username, password(s.Password, s.PasswordFile))
}

// auth gets what a managed SASL mechanism sends the brokers, the way a
// connection would, and says what it got or which class of failure
// stopped it (kafkaauth.Classify); the brokers' verdict on it is the
// next step's (consumer.ProbeDLQ).
func (c *checker) auth(ctx context.Context) error {
	k := c.cfg.Kafka
	if !kafkaauth.Managed(k.SASL.Mechanism) {
		return nil
	}
	r, err := kafkaauth.Probe(ctx, k)
	if err != nil {
		what := "no token"
		if k.SASL.Mechanism == config.SASLAWSMSKIAM {
			what = "no credentials"
		}
		fmt.Fprintf(c.out, "kafka: SASL %s: %s (%s)\n", k.SASL.Mechanism, what, kafkaauth.Classify(err))
		return fmt.Errorf("kafka: %w", err)
	}
	fmt.Fprintf(c.out, "kafka: SASL %s: %s\n", r.Mechanism, r.What)
	return nil
}
