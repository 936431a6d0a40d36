package kafkaauth

import (
	"context"
	"fmt"
	"os"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	kaws "github.com/twmb/franz-go/pkg/sasl/aws"

	"sink/config"
)

// awsCreds is the AWS SDK's credentials provider for kafka.sasl.aws: the
// default chain (environment, shared config and credentials files with
// their profiles, web identity, ECS/EKS container credentials, EC2
// instance role), or a role assumed with the chain's credentials. The
// SDK's cache (aws.CredentialsCache, safe for concurrent use) refreshes
// them before they expire; every Retrieve asks it.
type awsCreds struct {
	provider awssdk.CredentialsProvider
	region   string
}

// newAWSCreds loads the SDK's configuration for a (the region, the
// profile) and, with role_arn, wraps the chain in an STS AssumeRole
// provider under its own cache.
//
// franz-go signs with the region in the brokers' host names (MSK's carry
// one) or, for other names (a private DNS alias), with AWS_REGION. So that
// the signature and the SDK agree, the region the SDK resolved
// (kafka.sasl.aws.region, else AWS_REGION, else the profile's) is put into
// AWS_REGION when that differs: the process has one AWS region.
func newAWSCreds(a config.AWS, name string, timeout time.Duration) (*awsCreds, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if a.Region != "" {
		opts = append(opts, awsconfig.WithRegion(a.Region))
	}
	if a.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(a.Profile))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &Error{Class: NoCredentials, Section: "kafka.sasl.aws", Detail: oneLine(err.Error(), 300), Err: err}
	}
	if cfg.Region != "" && os.Getenv("AWS_REGION") != cfg.Region {
		if err := os.Setenv("AWS_REGION", cfg.Region); err != nil {
			return nil, fmt.Errorf("kafka.sasl.aws.region: %w", err)
		}
	}
	c := &awsCreds{provider: cfg.Credentials, region: cfg.Region}
	if a.RoleARN != "" {
		session := a.RoleSessionName
		if session == "" {
			session = name
		}
		assume := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), a.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = session
		})
		c.provider = awssdk.NewCredentialsCache(assume)
	}
	if c.provider == nil {
		return nil, &Error{Class: NoCredentials, Section: "kafka.sasl.aws", Detail: "the AWS SDK configured no credentials provider"}
	}
	return c, nil
}

// retrieve returns the current credentials, from the cache or the chain.
func (c *awsCreds) retrieve(ctx context.Context) (awssdk.Credentials, error) {
	creds, err := c.provider.Retrieve(ctx)
	if err != nil {
		return creds, &Error{Class: NoCredentials, Section: "kafka.sasl.aws", Detail: oneLine(err.Error(), 400), Err: err}
	}
	return creds, nil
}

// auth is the franz-go callback of AWS_MSK_IAM: franz-go signs the
// kafka-cluster:Connect request with these credentials (SigV4), for the
// broker it connects to.
func (c *awsCreds) auth(ctx context.Context) (kaws.Auth, error) {
	creds, err := c.retrieve(ctx)
	if err != nil {
		return kaws.Auth{}, err
	}
	return kaws.Auth{AccessKey: creds.AccessKeyID, SecretKey: creds.SecretAccessKey, SessionToken: creds.SessionToken}, nil
}
